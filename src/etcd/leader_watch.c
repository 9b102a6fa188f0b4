/* etcd/leader_watch.c - see leader_watch.h. */
#include "etcd/leader_watch.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "core/cond.h"
#include "core/util.h"
#include "etcd/etcd.h"

#define LW_ETCD_TIMEOUT_MS 500   /* one look; a slow etcd only delays the next */
#define LW_ADDR_MAX 256

struct lw_conn {
    leader_watch *lw;
    int fd;
    int64_t term;
    char addr[LW_ADDR_MAX];
    uint64_t busy_since;         /* mono ms of the outstanding call, 0: none (atomic) */
    int kept;                    /* leader_watch_keep (atomic) */
    int fired;                   /* under lw->mu */
    char leader[LW_ADDR_MAX];    /* who etcd named when it fired */
    lw_conn *next;
};

struct leader_watch {
    char *name;                  /* endpoints "\n" cluster: the registry's key */
    char cluster[ETCD_KEY_MAX];   /* the leader key is built from it (etcd_leader_lookup) */
    int refs;                    /* under registry_mu */
    etcd_client *ec;             /* the thread's */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int stop;
    lw_conn *conns;
    uint64_t broken;
    uint64_t kept_look;          /* mono ms of the last look for a kept connection */
    leader_watch *next;          /* in the registry */
};

static pthread_mutex_t registry_mu = PTHREAD_MUTEX_INITIALIZER;
static leader_watch *registry;

/* ---- the thread ---- */

/* A call has waited LW_BUSY_MS on a connection not yet shut down, or
 * one is kept and LW_KEEP_MS passed since the last look for it. */
static int any_due(leader_watch *lw, uint64_t now) {
    int keep_due = now >= lw->kept_look + LW_KEEP_MS;
    for (lw_conn *w = lw->conns; w; w = w->next) {
        if (w->fired) continue;
        uint64_t since = __atomic_load_n(&w->busy_since, __ATOMIC_RELAXED);
        if (since && now >= since + LW_BUSY_MS) return 1;
        if (keep_due && __atomic_load_n(&w->kept, __ATOMIC_RELAXED)) {
            lw->kept_look = now;
            return 1;
        }
    }
    return 0;
}

/* Without SIGPIPE ignored (a program using libmoonkv), the write side
 * stays: the owner's next write to it would raise the signal. A blocked
 * read wakes either way. */
static int shut_how(void) {
    struct sigaction sa;
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN) return SHUT_RDWR;
    return SHUT_RD;
}

/* Every connection opened under another term than the leader's (addr,
 * term) goes down. The term alone tells leaders apart: a new election
 * makes a new key, with a new create revision; addresses are only shown. */
static void break_stale(leader_watch *lw, const char *addr, int64_t term) {
    int how = -1;
    for (lw_conn *w = lw->conns; w; w = w->next) {
        if (w->fired || w->term == term) continue;
        if (how < 0) how = shut_how();
        shutdown(w->fd, how);
        w->fired = 1;
        snprintf(w->leader, sizeof w->leader, "%s", addr);
        lw->broken++;
    }
}

/* Wait LW_PERIOD_MS; 1 if stopping. With lw->mu held. */
static int nap(leader_watch *lw) {
    struct timespec ts = cond_deadline_ms(LW_PERIOD_MS);
    while (!lw->stop && pthread_cond_timedwait(&lw->cv, &lw->mu, &ts) != ETIMEDOUT) {}
    return lw->stop;
}

static void *watch_main(void *arg) {
    leader_watch *lw = arg;
    pthread_mutex_lock(&lw->mu);
    while (!nap(lw)) {
        if (!any_due(lw, mono_ms())) continue;
        pthread_mutex_unlock(&lw->mu);
        char addr[LW_ADDR_MAX], err[ETCD_ERR_LEN];
        int found = 0;
        int64_t term = 0;
        /* No leader or no answer: nothing better to go to; the owner's own timeout stands. */
        int named = etcd_leader_lookup(lw->ec, lw->cluster, &found, addr, sizeof addr, &term, err,
                                       sizeof err) == 0 && found;
        pthread_mutex_lock(&lw->mu);
        if (named) break_stale(lw, addr, term);
    }
    pthread_mutex_unlock(&lw->mu);
    return NULL;
}

/* ---- the registry ---- */

static leader_watch *watch_new(const char *name, const char *endpoints, const char *cluster, char *err,
                               size_t errlen) {
    leader_watch *lw = xcalloc(1, sizeof *lw);
    if (!(lw->ec = etcd_create(endpoints, LW_ETCD_TIMEOUT_MS, err, errlen))) {
        free(lw);
        return NULL;
    }
    lw->name = xstrdup(name);
    snprintf(lw->cluster, sizeof lw->cluster, "%s", cluster && *cluster ? cluster : "moonkv");
    pthread_mutex_init(&lw->mu, NULL);
    cond_init_mono(&lw->cv);
    pthread_create(&lw->th, NULL, watch_main, lw);
    return lw;
}

leader_watch *leader_watch_open(const char *endpoints, const char *cluster, char *err, size_t errlen) {
    char name[1024];
    snprintf(name, sizeof name, "%s\n%s", endpoints ? endpoints : "", cluster ? cluster : "");
    pthread_mutex_lock(&registry_mu);
    leader_watch *lw = registry;
    while (lw && strcmp(lw->name, name) != 0) lw = lw->next;
    if (!lw && (lw = watch_new(name, endpoints, cluster, err, errlen))) {
        lw->next = registry;
        registry = lw;
    }
    if (lw) lw->refs++;
    pthread_mutex_unlock(&registry_mu);
    return lw;
}

void leader_watch_close(leader_watch *lw) {
    if (!lw) return;
    pthread_mutex_lock(&registry_mu);
    int last = --lw->refs == 0;
    if (last) {
        leader_watch **p = &registry;
        while (*p != lw) p = &(*p)->next;
        *p = lw->next;
    }
    pthread_mutex_unlock(&registry_mu);
    if (!last) return;
    pthread_mutex_lock(&lw->mu);
    lw->stop = 1;
    pthread_cond_signal(&lw->cv);
    pthread_mutex_unlock(&lw->mu);
    pthread_join(lw->th, NULL);   /* its etcd call ends within its bound */
    while (lw->conns) {           /* an owner that never removed its own */
        lw_conn *w = lw->conns;
        lw->conns = w->next;
        free(w);
    }
    pthread_cond_destroy(&lw->cv);
    pthread_mutex_destroy(&lw->mu);
    etcd_free(lw->ec);
    free(lw->name);
    free(lw);
}

/* ---- watched connections ---- */

lw_conn *leader_watch_add(leader_watch *lw, int fd, const char *addr, int64_t term) {
    if (!lw || fd < 0) return NULL;
    lw_conn *w = xcalloc(1, sizeof *w);
    w->lw = lw;
    w->fd = fd;
    w->term = term;
    snprintf(w->addr, sizeof w->addr, "%s", addr);
    pthread_mutex_lock(&lw->mu);
    w->next = lw->conns;
    lw->conns = w;
    pthread_mutex_unlock(&lw->mu);
    return w;
}

void leader_watch_remove(lw_conn *w) {
    if (!w) return;
    leader_watch *lw = w->lw;
    pthread_mutex_lock(&lw->mu);
    lw_conn **p = &lw->conns;
    while (*p && *p != w) p = &(*p)->next;
    if (*p) *p = w->next;
    pthread_mutex_unlock(&lw->mu);
    free(w);
}

void leader_watch_busy(lw_conn *w, int busy) {
    if (w) __atomic_store_n(&w->busy_since, busy ? mono_ms() : 0, __ATOMIC_RELAXED);
}

void leader_watch_busy_within(lw_conn *w, int expect_ms) {
    if (w) __atomic_store_n(&w->busy_since, mono_ms() + (uint64_t)(expect_ms > 0 ? expect_ms : 0), __ATOMIC_RELAXED);
}

void leader_watch_keep(lw_conn *w, int keep) {
    if (w) __atomic_store_n(&w->kept, keep, __ATOMIC_RELAXED);
}

int leader_watch_fired(lw_conn *w, char *addr, size_t cap) {
    if (!w) return 0;
    pthread_mutex_lock(&w->lw->mu);
    int fired = w->fired;
    if (fired && addr) snprintf(addr, cap, "%s", w->leader);
    pthread_mutex_unlock(&w->lw->mu);
    return fired;
}

uint64_t leader_watch_broken(leader_watch *lw) {
    if (!lw) return 0;
    pthread_mutex_lock(&lw->mu);
    uint64_t n = lw->broken;
    pthread_mutex_unlock(&lw->mu);
    return n;
}
