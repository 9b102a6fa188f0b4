/* server/put_guard.c - drops streaming puts whose bytes stop arriving
 * (see put_guard.h): one loop timer sweeps the clients, and a put that does
 * not fit may take the space of a stalled one. */
#include "server/put_guard.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/loop.h"
#include "core/util.h"
#include "server/networking.h"

#define GUARD_PERIOD_MAX_MS 1000
#define GUARD_PERIOD_MIN_MS 25

typedef struct put_guard {
    loop_timer *sweep;
    server *srv;
} put_guard;

static uint64_t idle_ms(const client *c, uint64_t now) {
    return now > c->pending_put_last_ms ? now - c->pending_put_last_ms : 0;
}

const char *put_guard_verdict(const mkv_config *cfg, const client *c, uint64_t now, char *buf,
                              size_t len) {
    /* A deferred command's value is all there, waiting for its turn. */
    if ((!c->pending_put && !c->put_discarding) || (c->flags & CLIENT_DEFERRED)) return NULL;
    uint64_t limit = (uint64_t)cfg->put_timeout_ms;
    uint64_t age = now > c->pending_put_start_ms ? now - c->pending_put_start_ms : 0;
    if (idle_ms(c, now) >= limit) {
        snprintf(buf, len, "ERR put timed out: no value bytes for %llu ms (%llu of %llu arrived)",
                 (unsigned long long)idle_ms(c, now), (unsigned long long)c->pending_put_landed,
                 (unsigned long long)c->pending_put_size);
        return buf;
    }
    /* Past the timeout a large value must keep up an average rate. */
    if (cfg->put_min_rate && age >= limit && age > 0 &&
        c->pending_put_landed < c->pending_put_size &&
        c->pending_put_landed * 1000 / age < cfg->put_min_rate) {
        snprintf(buf, len,
                 "ERR put too slow: %llu of %llu bytes in %llu ms, under the minimum of %llu bytes/s",
                 (unsigned long long)c->pending_put_landed, (unsigned long long)c->pending_put_size,
                 (unsigned long long)age, (unsigned long long)cfg->put_min_rate);
        return buf;
    }
    return NULL;
}

static void drop(client *c, const char *why) {
    log_notice("Client id=%llu addr=%s: %s", (unsigned long long)c->id, c->addr, why);
    client_drop_put(c, why);
}

static void sweep_one(client *c, void *ctx) {
    char why[256];
    const char *v = put_guard_verdict(&c->srv->cfg, c, *(uint64_t *)ctx, why, sizeof why);
    if (v) drop(c, v);
}

static void sweep_cb(event_loop *el, void *data) {
    put_guard *g = data;
    uint64_t now = mono_ms();
    clients_foreach(g->srv, sweep_one, &now);
}

typedef struct victim_search {
    const client *asker;
    uint64_t now, stall_ms;
    client *best;
    uint64_t best_owed;
} victim_search;

static void consider(client *c, void *ctx) {
    victim_search *vs = ctx;
    if (c == vs->asker || !c->pending_put || (c->flags & CLIENT_DEFERRED) || idle_ms(c, vs->now) < vs->stall_ms) return;
    uint64_t owed = c->pending_put_size - c->pending_put_landed;
    if (!vs->best || owed > vs->best_owed) {
        vs->best = c;
        vs->best_owed = owed;
    }
}

int put_guard_reclaim(server *srv, const client *asker) {
    victim_search vs = {.asker = asker, .now = mono_ms(), .stall_ms = (uint64_t)srv->cfg.put_stall_ms};
    clients_foreach(srv, consider, &vs);
    if (!vs.best) return 0;
    char why[256];
    snprintf(why, sizeof why,
             "ERR put aborted: no value bytes for %llu ms while another put needed the space "
             "(%llu of %llu arrived)",
             (unsigned long long)idle_ms(vs.best, vs.now), (unsigned long long)vs.best->pending_put_landed,
             (unsigned long long)vs.best->pending_put_size);
    drop(vs.best, why);
    return 1;
}

void put_guard_start(server *srv) {
    put_guard *g = xcalloc(1, sizeof *g);
    g->srv = srv;
    int period = srv->cfg.put_timeout_ms / 4;
    if (period > GUARD_PERIOD_MAX_MS) period = GUARD_PERIOD_MAX_MS;
    if (period < GUARD_PERIOD_MIN_MS) period = GUARD_PERIOD_MIN_MS;
    g->sweep = loop_timer_create(srv->loop, sweep_cb, g);
    loop_timer_start(g->sweep, period, period);
    srv->put_guard = g;
}

void put_guard_stop(server *srv) {
    put_guard *g = srv->put_guard;
    if (!g) return;
    loop_timer_free(g->sweep);
    free(g);
    srv->put_guard = NULL;
}
