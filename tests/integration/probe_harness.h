/* tests/integration/probe_harness.h - "does the cluster serve?" probes
 * through a gateway (SET/GET over RESP) and through a libmoonkv client,
 * and a bounded wait until one holds: how the failover and restart tests
 * and the bench's failover step time the first put and get. */
#ifndef MKV_PROBE_HARNESS_H
#define MKV_PROBE_HARNESS_H

#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/moonkv.h"
#include "core/util.h"
#include "support/harness.h"

#define H_PROBE_BUF 8192   /* buf: values up to half of it */

typedef struct h_probe {
    redisContext *gw;      /* a gateway, or NULL */
    mkv_client *mc;        /* a client with buf registered, or NULL */
    char *buf;
    int replicas;          /* of the client's puts (0: its default) */
} h_probe;

typedef int h_probe_fn(h_probe *p, const char *key, const char *val);

static inline int h_gw_set(h_probe *p, const char *key, const char *val) {
    redisReply *r = redisCommand(p->gw, "SET %s %s", key, val);
    int ok = r && r->type == REDIS_REPLY_STATUS && strcmp(r->str, "OK") == 0;
    freeReplyObject(r);
    return ok;
}

static inline int h_gw_get_is(h_probe *p, const char *key, const char *val) {
    redisReply *r = redisCommand(p->gw, "GET %s", key);
    int ok = r && r->type == REDIS_REPLY_STRING && strcmp(r->str, val) == 0;
    freeReplyObject(r);
    return ok;
}

static inline int h_lib_put(h_probe *p, const char *key, const char *val) {
    size_t n = strlen(val);
    memcpy(p->buf, val, n);
    return mkv_put(p->mc, key, strlen(key), p->buf, n, p->replicas) == MKV_OK;
}

static inline int h_lib_get_is(h_probe *p, const char *key, const char *val) {
    size_t got = 0, half = H_PROBE_BUF / 2;
    memset(p->buf + half, 0, half);
    return mkv_get(p->mc, key, strlen(key), p->buf + half, half, &got) == MKV_OK &&
           got == strlen(val) && memcmp(p->buf + half, val, got) == 0;
}

/* Connect to the gateway on gw_port (0: none) and a client with opt
 * (NULL: none), its buffer registered. 0, or -1 with the reason printed. */
static inline int h_probe_open(h_probe *p, int gw_port, const mkv_options *opt) {
    memset(p, 0, sizeof *p);
    p->buf = calloc(1, H_PROBE_BUF);
    if (gw_port && !(p->gw = h_redis(gw_port))) {
        printf("# probe: no gateway on port %d\n", gw_port);
        return -1;
    }
    if (opt && (mkv_connect(&p->mc, opt) != MKV_OK ||
                mkv_register_buffer(p->mc, p->buf, H_PROBE_BUF) != MKV_OK)) {
        printf("# probe: %s\n", p->mc ? mkv_last_error(p->mc) : mkv_last_error(NULL));
        return -1;
    }
    return 0;
}

static inline void h_probe_close(h_probe *p) {
    mkv_close(p->mc);
    if (p->gw) redisFree(p->gw);
    free(p->buf);
    memset(p, 0, sizeof *p);
}

/* h_probe_open retried (every 200 ms) until it works or wait_ms passed:
 * the first lookup of a leader through etcd may outlast one timeout_ms
 * on a loaded machine. 0, or -1. */
static inline int h_probe_open_within(h_probe *p, int gw_port, const mkv_options *opt, int wait_ms) {
    uint64_t end = mono_ms() + (uint64_t)wait_ms;
    for (;;) {
        if (h_probe_open(p, gw_port, opt) == 0) return 0;
        h_probe_close(p);
        if (mono_ms() >= end) return -1;
        usleep(200 * 1000);
    }
}

/* ms from t0 until f holds (retried every 20 ms), or -1 after limit_ms. */
static inline long long h_until(h_probe_fn *f, h_probe *p, const char *key, const char *val,
                                uint64_t t0, int limit_ms) {
    while (mono_ms() - t0 < (uint64_t)limit_ms) {
        if (f(p, key, val)) return (long long)(mono_ms() - t0);
        usleep(20000);
    }
    return -1;
}

#endif
