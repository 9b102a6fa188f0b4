/* client/mlink.c - the core's one master connection, shared by every
 * lane and pipelined across threads.
 *
 * RESP replies come back in the order the commands went out, so the link
 * keeps a FIFO of waiters, one per call: a caller writes its commands
 * and joins the queue in one step (send_mu), then waits. Whoever waits
 * while nobody reads becomes the reader: it reads what has come, hands
 * each complete reply to the waiter at the head and leaves as soon as
 * its own came, letting another waiter take over. hiredis's context is
 * kept for its connect, its fd and its (bounded) reply reader; its own
 * I/O, which assumes one thread, is not used.
 *
 * A waiter may also be a callback (mkv_link_send, the async face's): it
 * joins the same queue, and when its reply is handed out it moves to a
 * list of fired callbacks instead of waking a thread. Only a thread in
 * mkv_link_serve runs them, outside the locks: a thread in a blocking
 * call that reads for everyone never runs another's callback.
 *
 * A connection that breaks (closed, a write fails, a reply overdue, the
 * etcd leader changed) fails every waiter on it at once; the next call
 * opens a new one. A command whose reply was lost is never sent again,
 * since it may have taken effect. A master that says it is not the
 * leader (READONLY) retires the connection instead: nothing more goes
 * on it, the replies it owes are still handed out, then it breaks. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "client/client.h"
#include "core/util.h"
#include "etcd/etcd.h"
#include "etcd/leader_watch.h"
#include "link/master_link.h"

#define READ_SLICE_MS 100    /* a reader looks at the head's deadline this often */
#define READ_CHUNK    16384
#define SERVE_WAIT_MS 10     /* a server waits this long for another reader's replies */
#define NOW_TURNS     8      /* mkv_link_serve_now reads at most this many chunks a call */

/* The callbacks this thread runs after what it reads: SERVE_NONE (a
 * blocking call's reader runs none), SERVE_ALL (mkv_link_serve's), or
 * those whose waiter's notify fd is this (mkv_link_serve_now's). */
#define SERVE_NONE (-2)
#define SERVE_ALL  (-1)
static __thread int serving = SERVE_NONE;

static void notify_post(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {}
}

void mkv_link_init(mkv_mlink *L) {
    memset(L, 0, sizeof *L);
    pthread_mutex_init(&L->send_mu, NULL);
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
}

/* Callback waiters left over (their async face is gone: the caller
 * closed it first, so none should be). */
static void waiters_free(mkv_waiter *w) {
    for (mkv_waiter *next; w; w = next) {
        next = w->next;
        if (!w->fn) continue;
        if (w->reply) freeReplyObject(w->reply);
        free(w);
    }
}

void mkv_link_free(mkv_mlink *L) {
    waiters_free(L->head);
    waiters_free(L->fired);
    leader_watch_remove(L->watched);   /* before the fd goes */
    if (L->rc) redisFree(L->rc);
    pthread_mutex_destroy(&L->send_mu);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
}

/* ---- breaking and opening (mu held unless said) ---- */

/* w is done: a callback's goes to the fired list for mkv_link_serve,
 * and its notify fd is posted unless this thread runs it next. */
static void waiter_done(mkv_mlink *L, mkv_waiter *w) {
    if (!w->fn) return;
    w->next = NULL;
    if (L->fired_tail) L->fired_tail->next = w;
    else L->fired = w;
    L->fired_tail = w;
    if (w->notify >= 0 && serving != SERVE_ALL && serving != w->notify) notify_post(w->notify);
}

/* The connection is done for: its waiters fail with code now. Its fd is
 * shut down (a reader or writer on it wakes) and freed by the next open,
 * once no thread is inside it. */
static void link_broke(mkv_mlink *L, int code, const char *why) {
    if (!L->broken) {
        L->broken = 1;
        L->why_code = code;
        char leader[128];
        if (leader_watch_fired(L->watched, leader, sizeof leader))
            snprintf(L->why, sizeof L->why, "etcd names another leader (%s) while the reply was due", leader);
        else
            snprintf(L->why, sizeof L->why, "%s", why);
        if (L->rc) shutdown(L->rc->fd, SHUT_RDWR);
    }
    for (mkv_waiter *w = L->head, *next; w; w = next) {
        next = w->next;
        w->done = 1;
        w->code = L->why_code;
        waiter_done(L, w);
    }
    L->head = L->tail = NULL;
    leader_watch_busy(L->watched, 0);
    pthread_cond_broadcast(&L->cv);
}

#define NOT_LEADER "the master is not the leader"

/* Breaking it at once would fail the commands behind the refused one,
 * and those may have been answered by a master that has just begun to
 * lead (an election's winner answers READONLY until its loop hears). */
void mkv_link_retire(mkv_client *c) {
    mkv_mlink *L = &c->core->link;
    pthread_mutex_lock(&L->mu);
    if (L->rc && !L->broken) {
        if (L->head) L->retiring = 1;
        else link_broke(L, MKV_ECONN, NOT_LEADER);
    }
    pthread_mutex_unlock(&L->mu);
}

/* Every failure to reach the master says "master ..." first: that is how
 * a caller (the gateway's TRYAGAIN, cluster_call.c) tells the master link
 * from a node's data plane. */

/* --etcd: point the link at the current leader. */
static int leader_lookup(mkv_client *c, mkv_client *h, mkv_mlink *L) {
    char addr[256], err[ETCD_ERR_LEN];
    int found = 0;
    int64_t term = 0;
    if (etcd_leader_lookup(h->etcd, h->cluster, &found, addr, sizeof addr, &term, err, sizeof err) != 0)
        return mkv_fail(c, MKV_ECONN, "master unknown: etcd: %s", err);
    if (!found) return mkv_fail(c, MKV_ECONN, "master unknown: no leader in etcd for cluster '%s'", h->cluster);
    char host[sizeof L->host];
    int port;
    if (parse_hostport(addr, host, sizeof host, &port) != 0)
        return mkv_fail(c, MKV_EPROTO, "bad leader address '%.64s' in etcd", addr);
    pthread_mutex_lock(&L->mu);
    memcpy(L->host, host, sizeof host);
    L->port = port;
    L->leader_term = term;
    pthread_mutex_unlock(&L->mu);
    return MKV_OK;
}

/* Connect, AUTH (password), prove the cluster secret: every command the
 * client sends (MOON.RELEASE ahead of the rest, too) finds the
 * connection a member's (link/master_link.h). send_mu held, mu not; the
 * connection options are the handle's (the core's first lane). */
static int link_open(mkv_client *c, mkv_mlink *L) {
    mkv_client *h = c->core->lanes[0];
    if (h->etcd) {
        int rc = leader_lookup(c, h, L);
        if (rc != MKV_OK) return rc;
    }
    char hostport[sizeof L->host + 16], err[MKV_ERR_LEN];
    pthread_mutex_lock(&L->mu);
    snprintf(hostport, sizeof hostport, "%s:%d", L->host, L->port);
    int64_t term = L->leader_term;
    pthread_mutex_unlock(&L->mu);
    redisContext *rc;
    int st = proto_master_open(&rc, hostport, h->password, h->secret, h->timeout_ms, h->timeout_ms, err, sizeof err);
    if (st == PROTO_LINK_EAUTH)
        return mkv_fail(c, MKV_EAUTH, "%s%s", err,
                        h->password ? "" : " (no password given: set mkv_options.password if the master has requirepass)");
    if (st != PROTO_LINK_OK) return mkv_fail(c, MKV_ECONN, "master %s: %s", hostport, err);
    /* Before anyone's command: a new leader holds none of our pins. */
    if (mkv_pins_restore(&c->core->pins, rc, err, sizeof err) != 0) {
        redisFree(rc);
        return mkv_fail(c, MKV_ECONN, "master %s: pinning again: %s", hostport, err);
    }
    pthread_mutex_lock(&c->core->mu);
    uint64_t id = ++c->core->conns;
    pthread_mutex_unlock(&c->core->mu);
    /* The reader's recv blocks at most a slice, then looks at the deadlines. */
    struct timeval tv = {.tv_sec = 0, .tv_usec = READ_SLICE_MS * 1000};
    setsockopt(rc->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    struct lw_conn *watched = h->watch ? leader_watch_add(h->watch, rc->fd, hostport, term) : NULL;
    pthread_mutex_lock(&L->mu);
    L->rc = rc;
    L->watched = watched;
    L->broken = 0;
    L->retiring = 0;
    L->id = id;
    pthread_mutex_unlock(&L->mu);
    return MKV_OK;
}

/* The holder of send_mu may wait (connecting, or for room to write):
 * a sender that must not wait does not queue behind it. */
static void stall_mark(mkv_mlink *L, int on) { __atomic_store_n(&L->stalled, on, __ATOMIC_RELEASE); }

/* A live connection, opened if there is none (or it broke). send_mu held. */
static int link_ready(mkv_client *c, mkv_mlink *L) {
    pthread_mutex_lock(&L->mu);
    if (L->rc && !L->broken) {
        pthread_mutex_unlock(&L->mu);
        return MKV_OK;
    }
    stall_mark(L, 1);
    while (L->reading) pthread_cond_wait(&L->cv, &L->mu);   /* the broken one's reader leaves */
    redisContext *old = L->rc;
    struct lw_conn *oldw = L->watched;
    L->rc = NULL;
    L->watched = NULL;
    pthread_mutex_unlock(&L->mu);
    leader_watch_remove(oldw);
    if (old) redisFree(old);
    int rc = link_open(c, L);
    stall_mark(L, 0);
    return rc;
}

int mkv_link_open(mkv_client *c) {
    mkv_mlink *L = &c->core->link;
    pthread_mutex_lock(&L->send_mu);
    int rc = link_ready(c, L);
    pthread_mutex_unlock(&L->send_mu);
    return rc;
}

int mkv_link_peek(mkv_mlink *L, int keep, uint64_t *id) {
    pthread_mutex_lock(&L->mu);
    int fd = L->rc && !L->broken ? L->rc->fd : -1;
    *id = L->id;
    leader_watch_keep(L->watched, keep);
    pthread_mutex_unlock(&L->mu);
    return fd;
}

void mkv_link_drop_id(mkv_mlink *L, uint64_t id) {
    pthread_mutex_lock(&L->mu);
    if (L->rc && L->id == id) link_broke(L, MKV_ECONN, "master closed the connection");
    pthread_mutex_unlock(&L->mu);
}

void mkv_link_where(mkv_client *c, const char *host, int port) {
    mkv_mlink *L = &c->core->link;
    pthread_mutex_lock(&L->mu);
    snprintf(L->host, sizeof L->host, "%s", host);
    L->port = port;
    pthread_mutex_unlock(&L->mu);
}

/* ---- replies ---- */

/* Complete replies in the reader handed to the waiters in order; -1 on a
 * reply that does not parse (or is beyond the reader's bounds). */
static int hand_out(mkv_mlink *L) {
    for (;;) {
        void *r = NULL;
        if (redisReaderGetReply(L->rc->reader, &r) != REDIS_OK) return -1;
        if (!r) return 0;
        mkv_waiter *w = L->head;
        if (!w) {   /* nobody asked: the stream is not ours to trust */
            freeReplyObject(r);
            return -1;
        }
        if (w->skip > 0) {   /* MOON.RELEASE's ahead of its command, or a pipeline's */
            w->skip--;
            freeReplyObject(r);
            continue;
        }
        w->reply = r;
        w->done = 1;
        w->code = MKV_OK;
        L->head = w->next;
        if (!L->head) {
            L->tail = NULL;
            leader_watch_busy(L->watched, 0);
        }
        waiter_done(L, w);
        if (!L->head && L->retiring) {   /* the last reply it owed */
            link_broke(L, MKV_ECONN, NOT_LEADER);
            return 0;
        }
    }
}

/* Bytes from fd: a recv that blocks up to READ_SLICE_MS (SO_RCVTIMEO),
 * or with wake_fd (>= 0) only what has come once either is readable,
 * or with READ_NOW what has come. */
#define READ_NOW (-2)
static ssize_t read_some(int fd, int wake_fd, char *buf, size_t len) {
    if (wake_fd == READ_NOW) return recv(fd, buf, len, MSG_DONTWAIT);
    if (wake_fd < 0) return recv(fd, buf, len, 0);
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = wake_fd, .events = POLLIN}};
    if (poll(p, 2, READ_SLICE_MS) <= 0 || !p[0].revents) {
        errno = EAGAIN;
        return -1;
    }
    return recv(fd, buf, len, MSG_DONTWAIT);
}

/* One turn as the reader (mu held, released while waiting): what came
 * within READ_SLICE_MS (READ_NOW: at once), handed out; an overdue head
 * breaks the link. The bytes read. */
static ssize_t read_turn(mkv_mlink *L, int wake_fd) {
    int fd = L->rc->fd;
    L->reading = 1;
    pthread_mutex_unlock(&L->mu);
    char buf[READ_CHUNK];
    ssize_t n = read_some(fd, wake_fd, buf, sizeof buf);
    int err = errno;
    pthread_mutex_lock(&L->mu);
    L->reading = 0;
    if (!L->broken) {
        if (n > 0) {
            if (redisReaderFeed(L->rc->reader, buf, (size_t)n) != REDIS_OK || hand_out(L) != 0)
                link_broke(L, MKV_EPROTO, "a reply that does not parse");
        } else if (n == 0) {
            link_broke(L, MKV_ECONN, "connection closed by the master");
        } else if (err != EAGAIN && err != EINTR) {
            link_broke(L, MKV_ECONN, strerror(err));
        }
    }
    if (!L->broken && L->head && mono_ms() >= L->head->deadline_ms)
        link_broke(L, MKV_ETIMEDOUT, "no reply within the timeout");
    pthread_cond_broadcast(&L->cv);
    return n;
}

/* Until w is done: reading when nobody is, else waiting. mu held. */
static void wait_reply(mkv_mlink *L, mkv_waiter *w) {
    while (!w->done) {
        if (!L->reading) {
            read_turn(L, -1);
        } else {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 200 * 1000000L;   /* a reader broadcasts every slice; this only bounds a miss */
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&L->cv, &L->mu, &ts);
        }
    }
}

/* ---- sending ---- */

/* All of buf on fd by the deadline: 0, or an MKV_E* code. */
static int send_all(mkv_mlink *L, int fd, const char *buf, size_t len, uint64_t deadline) {
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return MKV_ECONN;
        uint64_t now = mono_ms();
        if (now >= deadline) return MKV_ETIMEDOUT;
        struct pollfd p = {.fd = fd, .events = POLLOUT};
        uint64_t left = deadline - now;
        stall_mark(L, 1);
        int pr = poll(&p, 1, left > 1000 ? 1000 : (int)left);
        stall_mark(L, 0);
        if (pr < 0 && errno != EINTR) return MKV_ECONN;
    }
    return 0;
}

void mkv_out_add(mkv_out *o, int argc, const char **argv, const size_t *argvlen) {
    char *cmd = NULL;
    long long n = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    if (n < 0) abort();   /* out of memory only */
    if (o->len + (size_t)n > o->cap) {
        o->cap = (o->len + (size_t)n) * 2;
        o->buf = xrealloc(o->buf, o->cap);
    }
    memcpy(o->buf + o->len, cmd, (size_t)n);
    o->len += (size_t)n;
    o->count++;
    redisFreeCommand(cmd);
}

void mkv_out_append(mkv_out *o, const mkv_out *from) {
    if (from->len == 0) return;   /* a lease flush's own words: none (its buf may be NULL) */
    if (o->len + from->len > o->cap) {
        o->cap = (o->len + from->len) * 2;
        o->buf = xrealloc(o->buf, o->cap);
    }
    memcpy(o->buf + o->len, from->buf, from->len);
    o->len += from->len;
    o->count += from->count;
}

void mkv_out_free(mkv_out *o) {
    free(o->buf);
    *o = (mkv_out){0};
}

/* w joins the queue (mu held): its reply is the one after the others
 * queued, out's replies but its last skipped. A server waiting for a
 * queue to read (mkv_link_serve) is woken by the first. */
static void waiter_queue(mkv_client *c, mkv_mlink *L, const mkv_out *out, mkv_waiter *w) {
    w->skip = out->count - 1;
    w->deadline_ms = mono_ms() + (uint64_t)c->timeout_ms;
    w->conn = L->id;
    if (L->tail) {
        L->tail->next = w;
    } else {
        L->head = w;
        leader_watch_busy(L->watched, 1);
        if (w->fn) pthread_cond_broadcast(&L->cv);
    }
    L->tail = w;
}

/* The rest of out after its first `sent` bytes on fd (send_mu held, mu
 * not); a failed write breaks the connection, which fails its waiters. */
static void send_rest(mkv_mlink *L, int fd, const mkv_out *out, size_t sent, uint64_t deadline) {
    int rc = send_all(L, fd, out->buf + sent, out->len - sent, deadline);
    if (rc != 0) {
        pthread_mutex_lock(&L->mu);
        link_broke(L, rc, rc == MKV_ETIMEDOUT ? "write timed out" : "write failed");
        pthread_mutex_unlock(&L->mu);
    }
}

/* w joins the queue and out goes on the wire, opening the connection if
 * needed: MKV_OK once w is queued (it then completes by the queue: its
 * reply, or the connection's break, which a failed write causes), else
 * why not (w not queued, nothing sent). */
static int link_post(mkv_client *c, mkv_mlink *L, const mkv_out *out, mkv_waiter *w) {
    pthread_mutex_lock(&L->send_mu);
    int rc = link_ready(c, L);
    if (rc != MKV_OK) {
        pthread_mutex_unlock(&L->send_mu);
        return rc;
    }
    pthread_mutex_lock(&L->mu);
    if (L->broken || L->retiring) {   /* between link_ready and now, or replies still due: nothing sent */
        rc = L->broken ? mkv_fail(c, L->why_code, "master %s:%d: %s", L->host, L->port, L->why)
                       : mkv_fail(c, MKV_ECONN, "master %s:%d: %s (replies still due)", L->host, L->port, NOT_LEADER);
        pthread_mutex_unlock(&L->mu);
        pthread_mutex_unlock(&L->send_mu);
        return rc;
    }
    waiter_queue(c, L, out, w);
    int fd = L->rc->fd;
    uint64_t deadline = w->deadline_ms;   /* w may be done and gone once mu is let go */
    pthread_mutex_unlock(&L->mu);
    send_rest(L, fd, out, 0, deadline);
    pthread_mutex_unlock(&L->send_mu);
    return MKV_OK;
}

/* As link_post, but only on a connection that is up, not being opened
 * or waited on by another sender, and only if the socket takes some of
 * out at once: MKV_LINK_DOWN otherwise (w not queued, nothing sent). The first write goes out under mu, before w is
 * queued: no reader hands a reply out meanwhile, and a write that would
 * block leaves nothing to undo. */
static int link_post_up(mkv_client *c, mkv_mlink *L, const mkv_out *out, mkv_waiter *w) {
    if (pthread_mutex_trylock(&L->send_mu) != 0) {
        if (__atomic_load_n(&L->stalled, __ATOMIC_ACQUIRE)) return MKV_LINK_DOWN;
        pthread_mutex_lock(&L->send_mu);   /* another sender's write, not a wait */
    }
    pthread_mutex_lock(&L->mu);
    ssize_t n = -1;
    if (L->rc && !L->broken && !L->retiring) {
        while ((n = send(L->rc->fd, out->buf, out->len, MSG_NOSIGNAL | MSG_DONTWAIT)) < 0 && errno == EINTR) {}
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) link_broke(L, MKV_ECONN, "write failed");
    }
    if (n < 0) {
        pthread_mutex_unlock(&L->mu);
        pthread_mutex_unlock(&L->send_mu);
        return MKV_LINK_DOWN;
    }
    waiter_queue(c, L, out, w);
    int fd = L->rc->fd;
    uint64_t deadline = w->deadline_ms;
    pthread_mutex_unlock(&L->mu);
    if ((size_t)n < out->len) send_rest(L, fd, out, (size_t)n, deadline);   /* rare: the socket's buffer was near full */
    pthread_mutex_unlock(&L->send_mu);
    return MKV_OK;
}

redisReply *mkv_link_call(mkv_client *c, const mkv_out *out, int *code, int *sent, mkv_meanwhile *mw) {
    mkv_mlink *L = &c->core->link;
    mkv_waiter w = {0};
    int rc = link_post(c, L, out, &w);
    *sent = rc == MKV_OK;   /* some of it may have gone: never again */
    if (rc != MKV_OK) {
        *code = rc;
        return NULL;
    }
    c->conn_id = w.conn;
    if (mw && mw->fn) {   /* once: a retried command's reply comes later still */
        mw->fn(mw->arg);
        mw->fn = NULL;
    }
    pthread_mutex_lock(&L->mu);
    wait_reply(L, &w);
    char why[MKV_ERR_LEN], host[sizeof L->host];
    snprintf(why, sizeof why, "%s", L->why);
    snprintf(host, sizeof host, "%s", L->host);
    int port = L->port;
    pthread_mutex_unlock(&L->mu);
    if (w.reply) {
        *code = MKV_OK;
        return w.reply;
    }
    *code = mkv_fail(c, w.code, "master %s:%d: %s", host, port, why);
    return NULL;
}

/* The fired callbacks whose notify is `only` (SERVE_ALL: every one),
 * taken off the list in order. mu held. */
static mkv_waiter *fired_take(mkv_mlink *L, int only) {
    mkv_waiter *w = L->fired;
    if (only == SERVE_ALL) {
        L->fired = L->fired_tail = NULL;
        return w;
    }
    mkv_waiter *mine = NULL, **mt = &mine;
    L->fired = L->fired_tail = NULL;
    for (mkv_waiter *next; w; w = next) {
        next = w->next;
        w->next = NULL;
        if (w->notify == only) {
            *mt = w;
            mt = &w->next;
        } else {
            if (L->fired_tail) L->fired_tail->next = w;
            else L->fired = w;
            L->fired_tail = w;
        }
    }
    return mine;
}

/* The fired callbacks (those of `only`), run outside the locks (mu held
 * on entry and exit). */
static void run_fired(mkv_mlink *L, int only) {
    for (mkv_waiter *w; L->fired && (w = fired_take(L, only));) {
        pthread_mutex_unlock(&L->mu);
        for (mkv_waiter *next; w; w = next) {
            next = w->next;
            w->fn(w->arg, w->reply, w->reply ? MKV_OK : w->code);
            free(w);
        }
        pthread_mutex_lock(&L->mu);
    }
}

int mkv_link_send(mkv_client *c, const mkv_out *out, mkv_reply_fn *fn, void *arg, int notify) {
    mkv_mlink *L = &c->core->link;
    mkv_waiter *w = xcalloc(1, sizeof *w);
    w->fn = fn;
    w->arg = arg;
    w->notify = notify;
    int rc = link_post(c, L, out, w);
    if (rc != MKV_OK) {
        free(w);
        fn(arg, NULL, rc);
    }
    return rc;
}

int mkv_link_send_up(mkv_client *c, const mkv_out *out, mkv_reply_fn *fn, void *arg, int notify) {
    mkv_waiter *w = xcalloc(1, sizeof *w);
    w->fn = fn;
    w->arg = arg;
    w->notify = notify;
    int rc = link_post_up(c, &c->core->link, out, w);
    if (rc != MKV_OK) free(w);
    return rc;
}

int mkv_link_fd(mkv_client *c, uint64_t *id) {
    mkv_mlink *L = &c->core->link;
    pthread_mutex_lock(&L->mu);
    int fd = L->rc && !L->broken && !L->retiring ? L->rc->fd : -1;
    *id = L->id;
    pthread_mutex_unlock(&L->mu);
    return fd;
}

int mkv_link_watch(mkv_client *c, int epfd, uint64_t *id) {
    mkv_mlink *L = &c->core->link;
    int added = 0;
    pthread_mutex_lock(&L->mu);
    if (L->rc && !L->broken && L->id != *id) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLET};
        added = epoll_ctl(epfd, EPOLL_CTL_ADD, L->rc->fd, &ev) == 0 || errno == EEXIST;
        if (added) *id = L->id;
    }
    pthread_mutex_unlock(&L->mu);
    return added;
}

int mkv_link_unwatch(mkv_client *c, int epfd, uint64_t id) {
    mkv_mlink *L = &c->core->link;
    pthread_mutex_lock(&L->mu);
    int removed = L->rc && L->id == id && epoll_ctl(epfd, EPOLL_CTL_DEL, L->rc->fd, NULL) == 0;
    pthread_mutex_unlock(&L->mu);
    return removed;
}

int mkv_link_up(mkv_client *c) {
    uint64_t id;
    return mkv_link_fd(c, &id) >= 0;
}

size_t mkv_link_serve_now(mkv_client *c, int only, int read) {
    mkv_mlink *L = &c->core->link;
    int was = serving;
    serving = only;
    pthread_mutex_lock(&L->mu);
    int turns = 0;
    size_t got = 0;
    for (ssize_t n = READ_CHUNK; read && n == READ_CHUNK && turns < NOW_TURNS && L->head && !L->reading && L->rc &&
                                 !L->broken;
         turns++)
        if ((n = read_turn(L, READ_NOW)) > 0) got += (size_t)n;
    if (turns == NOW_TURNS && only >= 0) notify_post(only);   /* more may wait: come again */
    if (!L->broken && L->head && mono_ms() >= L->head->deadline_ms)
        link_broke(L, MKV_ETIMEDOUT, "no reply within the timeout");
    run_fired(L, only);
    pthread_mutex_unlock(&L->mu);
    serving = was;
    return got;
}

void mkv_link_serve(mkv_client *c, int wake_fd) {
    mkv_mlink *L = &c->core->link;
    int was = serving;
    serving = SERVE_ALL;
    pthread_mutex_lock(&L->mu);
    if (!L->fired) {
        if (L->head && !L->reading && L->rc && !L->broken) {
            read_turn(L, wake_fd);
        } else {   /* another thread reads (it broadcasts), or the calls are not queued yet */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += SERVE_WAIT_MS * 1000000L;
            if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
            pthread_cond_timedwait(&L->cv, &L->mu, &ts);
        }
    }
    run_fired(L, SERVE_ALL);
    pthread_mutex_unlock(&L->mu);
    serving = was;
}

int mkv_link_connections(mkv_client *c) {
    pthread_mutex_lock(&c->core->mu);
    int n = (int)c->core->conns;
    pthread_mutex_unlock(&c->core->mu);
    return n;
}

int mkv_master_local_addr(mkv_client *c, struct sockaddr_storage *ss) {
    if (c->route) return MKV_EINVAL;   /* a master per group */
    mkv_mlink *L = &c->core->link;
    socklen_t sl = sizeof *ss;
    pthread_mutex_lock(&L->mu);
    int ok = L->rc && !L->broken && getsockname(L->rc->fd, (struct sockaddr *)ss, &sl) == 0;
    pthread_mutex_unlock(&L->mu);
    return ok ? MKV_OK : MKV_ECONN;
}
