/* backend/preauth_gate.c - see preauth_gate.h. */
#include "backend/preauth_gate.h"

#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"

#define SRC_LEN 16   /* an IPv6 address; IPv4 and unix peers use fewer bytes */

typedef struct pending {
    uint64_t ticket;           /* 0: free slot; also the age (tickets only grow) */
    int fd;
    uint8_t src[SRC_LEN];
} pending;

struct te_gate {
    pthread_mutex_t mu;
    int max, per_source;
    pending *slots;            /* max of them */
    int npending;
    uint64_t next_ticket;
    uint64_t evicted, failed, refused;
    /* the rate-limited log */
    uint64_t last_log_ms;
    uint64_t unlogged_evicted, unlogged_failed, unlogged_refused;
    char last_why[96];
};

te_gate *te_gate_create(int max, int per_source) {
    te_gate *g = xcalloc(1, sizeof *g);
    g->max = max > 0 ? max : TE_GATE_MAX_DEFAULT;
    g->per_source = per_source > 0 ? per_source : TE_GATE_PER_SOURCE_DEFAULT;
    if (g->per_source > g->max) g->per_source = g->max;
    g->slots = xcalloc((size_t)g->max, sizeof *g->slots);
    g->next_ticket = 1;
    pthread_mutex_init(&g->mu, NULL);
    return g;
}

void te_gate_destroy(te_gate *g) {
    if (!g) return;
    pthread_mutex_destroy(&g->mu);
    free(g->slots);
    free(g);
}

/* The source of a peer: its IP address (port left out); every unix peer
 * is the same local source. */
static void source_of(const struct sockaddr *sa, socklen_t len, uint8_t out[SRC_LEN]) {
    memset(out, 0, SRC_LEN);
    if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in))
        memcpy(out, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    else if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t)sizeof(struct sockaddr_in6))
        memcpy(out, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

/* One line for what happened since the last one, at most every
 * TE_GATE_LOG_MS. Called with g->mu held. */
static void maybe_log(te_gate *g) {
    uint64_t now = mono_ms();
    if (g->last_log_ms && now - g->last_log_ms < TE_GATE_LOG_MS) return;
    if (!g->unlogged_evicted && !g->unlogged_failed && !g->unlogged_refused) return;
    /* A warning: a legitimate client pushed out under load (every local
     * peer is one source) fails a transfer, and servers in tests log
     * warnings only. */
    log_warning("data plane: %llu unauthenticated connection(s) pushed out by newer ones, "
               "%llu failed handshake(s), %llu member(s) over max_conns since the last report "
               "(latest: %s; at most one such line per %d s)",
               (unsigned long long)g->unlogged_evicted, (unsigned long long)g->unlogged_failed,
               (unsigned long long)g->unlogged_refused, g->last_why, TE_GATE_LOG_MS / 1000);
    g->last_log_ms = now;
    g->unlogged_evicted = g->unlogged_failed = g->unlogged_refused = 0;
}

static void evict(te_gate *g, pending *p) {
    shutdown(p->fd, SHUT_RDWR);   /* its thread's handshake read ends now */
    p->ticket = 0;
    g->npending--;
    g->evicted++;
    g->unlogged_evicted++;
    snprintf(g->last_why, sizeof g->last_why, "unauthenticated limit reached");
}

/* The oldest pending slot, from src only when src is not NULL. */
static pending *oldest(te_gate *g, const uint8_t *src, int *count) {
    pending *best = NULL;
    *count = 0;
    for (int i = 0; i < g->max; i++) {
        pending *p = &g->slots[i];
        if (!p->ticket || (src && memcmp(p->src, src, SRC_LEN) != 0)) continue;
        (*count)++;
        if (!best || p->ticket < best->ticket) best = p;
    }
    return best;
}

static pending *free_slot(te_gate *g) {
    for (int i = 0; i < g->max; i++)
        if (!g->slots[i].ticket) return &g->slots[i];
    return NULL;
}

uint64_t te_gate_admit(te_gate *g, int fd, const struct sockaddr *peer, socklen_t len) {
    uint8_t src[SRC_LEN];
    source_of(peer, len, src);
    pthread_mutex_lock(&g->mu);
    int n;
    pending *victim = oldest(g, src, &n);
    if (n >= g->per_source) evict(g, victim);
    if (g->npending >= g->max) {
        victim = oldest(g, NULL, &n);
        evict(g, victim);
    }
    pending *slot = free_slot(g);   /* there is one: at most max - 1 are left */
    uint64_t t = g->next_ticket++;
    *slot = (pending){.ticket = t, .fd = fd};
    memcpy(slot->src, src, SRC_LEN);
    g->npending++;
    maybe_log(g);
    pthread_mutex_unlock(&g->mu);
    return t;
}

/* Removes ticket's slot; 0 if it was there, -1 if evicted before. */
static int leave(te_gate *g, uint64_t ticket) {
    for (int i = 0; i < g->max; i++) {
        if (g->slots[i].ticket != ticket) continue;
        g->slots[i].ticket = 0;
        g->npending--;
        return 0;
    }
    return -1;
}

int te_gate_passed(te_gate *g, uint64_t ticket) {
    pthread_mutex_lock(&g->mu);
    int rc = leave(g, ticket);
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void te_gate_failed(te_gate *g, uint64_t ticket, const char *why) {
    pthread_mutex_lock(&g->mu);
    if (leave(g, ticket) == 0) {   /* an evicted one was counted already */
        g->failed++;
        g->unlogged_failed++;
        snprintf(g->last_why, sizeof g->last_why, "%s", why);
    }
    maybe_log(g);
    pthread_mutex_unlock(&g->mu);
}

void te_gate_refused(te_gate *g, const char *why) {
    pthread_mutex_lock(&g->mu);
    g->refused++;
    g->unlogged_refused++;
    snprintf(g->last_why, sizeof g->last_why, "%s", why);
    maybe_log(g);
    pthread_mutex_unlock(&g->mu);
}

void te_gate_get_stats(te_gate *g, te_gate_stats *out) {
    pthread_mutex_lock(&g->mu);
    out->pending = (uint64_t)g->npending;
    out->evicted = g->evicted;
    out->failed = g->failed;
    out->refused = g->refused;
    pthread_mutex_unlock(&g->mu);
}
