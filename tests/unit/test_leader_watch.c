/* tests/unit/test_leader_watch.c - etcd/leader_watch.h against a fake
 * etcd (a thread answering every POST with a leader key of the term it is
 * told): a call waiting on a connection of the current term is left
 * alone; no etcd request is made while no call waits (or a long poll
 * waits no longer than it may); once etcd names a
 * newer term, a call blocked on a connection of the older one returns at
 * once (EOF) and the watch says who leads; one watch per cluster is
 * shared; a connection removed before its fd closes is never touched; a
 * kept one (leader_watch_keep) is looked at with no call waiting.
 * In the TSan build: the watch thread against its users. */
#include "etcd/leader_watch.h"
#include "support/harness.h"
#include "test.h"

#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/util.h"

typedef struct fake_etcd {
    int lfd, port;
    pthread_t th;
    atomic_int term;       /* the create revision it answers */
    atomic_int requests;
    atomic_int stop;
} fake_etcd;

/* Read a request to its end (headers, then Content-Length bytes). */
static void read_request(int fd) {
    char buf[4096];
    size_t len = 0;
    long want = -1;
    while (len < sizeof buf) {
        ssize_t n = read(fd, buf + len, sizeof buf - len);
        if (n <= 0) return;
        len += (size_t)n;
        char *he = memmem(buf, len, "\r\n\r\n", 4);
        if (he && want < 0) {
            char *cl = strcasestr(buf, "Content-Length:");
            want = (he + 4 - buf) + (cl ? atol(cl + 15) : 0);
        }
        if (want >= 0 && (long)len >= want) return;
    }
}

static void *etcd_main(void *arg) {
    fake_etcd *e = arg;
    while (!atomic_load(&e->stop)) {
        int fd = accept(e->lfd, NULL, NULL);
        if (fd < 0) continue;
        read_request(fd);
        atomic_fetch_add(&e->requests, 1);
        char body[256], reply[512];
        /* value: base64("127.0.0.1:1") */
        int bl = snprintf(body, sizeof body,
                          "{\"kvs\":[{\"key\":\"eA==\",\"value\":\"MTI3LjAuMC4xOjE=\",\"create_revision\":\"%d\"}]}",
                          atomic_load(&e->term));
        int rl = snprintf(reply, sizeof reply, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
                          bl, body);
        ssize_t w = write(fd, reply, (size_t)rl);
        (void)w;
        close(fd);
    }
    return NULL;
}

static int etcd_start(fake_etcd *e, int term) {
    memset(e, 0, sizeof *e);
    atomic_store(&e->term, term);
    e->port = h_free_port();
    e->lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(e->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)e->port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (e->port < 0 || bind(e->lfd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(e->lfd, 16) != 0) return -1;
    pthread_create(&e->th, NULL, etcd_main, e);
    return 0;
}

static void etcd_stop(fake_etcd *e) {
    atomic_store(&e->stop, 1);
    shutdown(e->lfd, SHUT_RDWR);   /* wakes the accept */
    pthread_join(e->th, NULL);
    close(e->lfd);
}

static fake_etcd etcd;
static char url[64];

/* A call blocked in recv on fd: how it ended (0 EOF, 1 data, -1 error). */
typedef struct blocked {
    pthread_t th;
    int fd;
    atomic_int done;
    int rc;
} blocked;

static void *block_main(void *arg) {
    blocked *b = arg;
    char ch;
    ssize_t n = recv(b->fd, &ch, 1, 0);
    b->rc = n > 0 ? 1 : n == 0 ? 0 : -1;
    atomic_store(&b->done, 1);
    return NULL;
}

/* The watch of cluster (*lw) and a connection sv[0] on it opened under
 * term (etcd names that term now); NULL if either could not be made. */
static lw_conn *watched_pair(const char *cluster, int term, leader_watch **lw, int sv[2]) {
    char err[256];
    *lw = leader_watch_open(url, cluster, err, sizeof err);
    if (!*lw || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return NULL;
    atomic_store(&etcd.term, term);
    return leader_watch_add(*lw, sv[0], "127.0.0.1:1", term);
}

/* The watch looked at etcd after `before` requests, within 10 s (waited
 * for: 900 ms once, which a loaded TSan run can pass before a first look). */
static int looked_since(int before) {
    for (uint64_t end = mono_ms() + 10000; atomic_load(&etcd.requests) == before && mono_ms() < end;) usleep(10 * 1000);
    return atomic_load(&etcd.requests) > before;
}

static void test_same_term_is_left_alone(void) {
    leader_watch *lw;
    int sv[2];
    lw_conn *w = watched_pair("c1", 5, &lw, sv);
    ASSERT(w);
    leader_watch_busy(w, 1);
    ASSERT(looked_since(atomic_load(&etcd.requests)));   /* a call waited */
    ASSERT(!leader_watch_fired(w, NULL, 0));
    char ch;
    ASSERT(recv(sv[0], &ch, 1, MSG_DONTWAIT) < 0);   /* still open: no EOF */
    /* No call waiting: no etcd request at all. */
    leader_watch_busy(w, 0);
    /* a look already under way may still land: until none came for 300 ms */
    int before = atomic_load(&etcd.requests);
    for (uint64_t end = mono_ms() + 10000; mono_ms() < end;) {
        usleep(300 * 1000);
        int now = atomic_load(&etcd.requests);
        if (now == before) break;
        before = now;
    }
    usleep(900 * 1000);
    ASSERT_EQ(atomic_load(&etcd.requests), before);
    /* A long poll may wait its time: no look before it is up. */
    leader_watch_busy_within(w, 3000);
    usleep(900 * 1000);
    ASSERT_EQ(atomic_load(&etcd.requests), before);
    leader_watch_busy(w, 0);
    leader_watch_remove(w);
    close(sv[0]);
    close(sv[1]);
    leader_watch_close(lw);
}

static void test_new_term_breaks_a_blocked_call(void) {
    char err[256], leader[64] = "";
    leader_watch *lw = leader_watch_open(url, "c2", err, sizeof err);
    ASSERT(lw);
    ASSERT(leader_watch_open(url, "c2", err, sizeof err) == lw);   /* shared */
    int sv[2], other[2];
    ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    ASSERT(socketpair(AF_UNIX, SOCK_STREAM, 0, other) == 0);
    atomic_store(&etcd.term, 7);
    lw_conn *w = leader_watch_add(lw, sv[0], "127.0.0.1:1", 7);
    lw_conn *gone = leader_watch_add(lw, other[0], "127.0.0.1:1", 7);
    leader_watch_remove(gone);   /* removed: never shut down, even of an older term */
    blocked b = {.fd = sv[0]};
    leader_watch_busy(w, 1);
    pthread_create(&b.th, NULL, block_main, &b);
    usleep(400 * 1000);
    ASSERT(!atomic_load(&b.done));
    uint64_t t0 = mono_ms();
    atomic_store(&etcd.term, 9);   /* a new election */
    while (!atomic_load(&b.done) && mono_ms() - t0 < 5000) usleep(5000);
    long long took = (long long)(mono_ms() - t0);
    ASSERT(atomic_load(&b.done));
    pthread_join(b.th, NULL);
    printf("# a blocked call on the old leader returned %lld ms after etcd named a new one\n", took);
    ASSERT_EQ(b.rc, 0);   /* EOF, as if the master had closed it */
    ASSERT(took < 2000);
    ASSERT(leader_watch_fired(w, leader, sizeof leader));
    ASSERT_STREQ(leader, "127.0.0.1:1");
    ASSERT_EQ(leader_watch_broken(lw), 1);
    char ch;
    ASSERT(recv(other[0], &ch, 1, MSG_DONTWAIT) < 0);   /* the removed one: untouched */
    leader_watch_busy(w, 0);
    leader_watch_remove(w);
    close(sv[0]), close(sv[1]), close(other[0]), close(other[1]);
    leader_watch_close(lw);
    leader_watch_close(lw);
}

/* A kept connection (leader_watch_keep: libmoonkv's pins) is looked at
 * with no call on it, and shut down once etcd names a newer term; kept
 * no more, it costs no etcd request. */
static void test_kept_connection_follows_a_new_term(void) {
    leader_watch *lw;
    int sv[2];
    lw_conn *w = watched_pair("c3", 11, &lw, sv);
    ASSERT(w);
    leader_watch_keep(w, 1);
    ASSERT(looked_since(atomic_load(&etcd.requests)));   /* no call waiting */
    ASSERT(!leader_watch_fired(w, NULL, 0));
    uint64_t t0 = mono_ms();
    atomic_store(&etcd.term, 12);
    while (!leader_watch_fired(w, NULL, 0) && mono_ms() - t0 < 10000) usleep(10 * 1000);
    ASSERT(leader_watch_fired(w, NULL, 0));
    char ch;
    ASSERT_EQ(recv(sv[0], &ch, 1, MSG_DONTWAIT), 0);   /* EOF: the keeper's poll wakes */
    printf("# a kept connection was shut down %lld ms after etcd named a new term\n", (long long)(mono_ms() - t0));
    leader_watch_remove(w);
    /* a new connection, not kept: no look */
    lw_conn *w2 = leader_watch_add(lw, sv[1], "127.0.0.1:1", 12);
    usleep(300 * 1000);
    int before = atomic_load(&etcd.requests);
    usleep(1200 * 1000);
    ASSERT_EQ(atomic_load(&etcd.requests), before);
    leader_watch_remove(w2);
    close(sv[0]);
    close(sv[1]);
    leader_watch_close(lw);
}

int main(void) {
    if (etcd_start(&etcd, 1) != 0) {
        printf("not ok - fake etcd: cannot listen\n");
        return 1;
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d", etcd.port);
    RUN_TEST(test_same_term_is_left_alone);
    RUN_TEST(test_new_term_breaks_a_blocked_call);
    RUN_TEST(test_kept_connection_follows_a_new_term);
    etcd_stop(&etcd);
    TEST_EXIT();
}
