/* client/client.c - the client's life cycle and its master connection
 * (errors.c maps the master's replies to MKV_E* codes). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client/client.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "core/workpool.h"
#include "etcd/etcd.h"
#include "etcd/leader_watch.h"
#include "link/master_link.h"
#include "proto/reply_bound.h"
#include "proto/status.h"

#define DEFAULT_MASTER  "127.0.0.1:7380"
#define DEFAULT_TIMEOUT 5000
#define ETCD_TIMEOUT_MS 1000   /* one etcd call */
#define LEADER_RETRY_MS 50     /* between attempts to find a leader */

void mkv_options_init(mkv_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->master = DEFAULT_MASTER;
    opt->transport = "auto";
    opt->replicas = 1;
    opt->timeout_ms = DEFAULT_TIMEOUT;
}

/* ---- the master connection (mlink.c) ---- */

/* Send one command, with MOON.RELEASE for this lane's finished reads
 * ahead of it, and wait for its reply. *sent: it went out (a command
 * whose reply was lost is never sent twice, since it may have taken
 * effect). */
static redisReply *command_once(mkv_client *c, int argc, const char **argv, const size_t *argvlen,
                                int *code, mkv_meanwhile *mw, int *sent) {
    mkv_out out = {0};
    mkv_leases_add(c, &out);
    mkv_out_add(&out, argc, argv, argvlen);
    redisReply *r = mkv_link_call(c, &out, code, sent, mw);
    mkv_out_free(&out);
    return r;
}

static int is_readonly(const redisReply *r) {
    return r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_READONLY;
}

redisReply *mkv_command(mkv_client *c, int argc, const char **argv, const size_t *argvlen,
                        int *code) {
    return mkv_command_meanwhile(c, argc, argv, argvlen, code, NULL);
}

redisReply *mkv_command_group(mkv_client *c, int *group, int argc, const char **argv, const size_t *argvlen,
                              int *code) {
    MKV_ROUTED(c, mkv_route_command_group(c, group, argc, argv, argvlen, code));
    if (*group > 0) {
        *code = MKV_ENOTFOUND;
        return NULL;
    }
    *group = 0;
    return mkv_command(c, argc, argv, argvlen, code);
}

redisReply *mkv_command_meanwhile(mkv_client *c, int argc, const char **argv, const size_t *argvlen,
                                  int *code, mkv_meanwhile *mw) {
    MKV_ON_LANE(c);   /* a caller outside the library (the gateway) gets one too */
    int sent;
    if (!c->core->lanes[0]->etcd) return command_once(c, argc, argv, argvlen, code, mw, &sent);
    /* With etcd, a master we cannot reach or that is not the leader
     * (READONLY: the command did nothing) sends us back to etcd until
     * timeout_ms. A reply lost after sending is not retried. */
    uint64_t deadline = mono_ms() + (uint64_t)c->timeout_ms;
    for (;;) {
        int sent;
        redisReply *r = command_once(c, argc, argv, argvlen, code, mw, &sent);
        if (r && !is_readonly(r)) return r;
        if (!r && sent) return NULL;
        if (r) {
            *code = mkv_reply_error(c, r->str, r->len);
            freeReplyObject(r);
            mkv_link_retire(c);
        }
        if (mono_ms() + LEADER_RETRY_MS >= deadline) return NULL;
        struct timespec ts = {0, LEADER_RETRY_MS * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* ---- connect / close ---- */

int mkv_lane_options(mkv_client *c, const mkv_options *opt) {
    const char *master = opt->master ? opt->master : DEFAULT_MASTER;
    int from_etcd = opt->etcd && *opt->etcd;   /* master is ignored then */
    if (!from_etcd && parse_hostport(master, c->host, sizeof c->host, &c->port) != 0)
        return mkv_fail(c, MKV_EINVAL, "bad master address '%s' (want host:port)", master);
    const char *secret = opt->cluster_secret ? opt->cluster_secret : "";
    if (strlen(secret) >= sizeof c->secret)
        return mkv_fail(c, MKV_EINVAL, "cluster secret longer than %d bytes", TE_SECRET_MAX - 1);
    snprintf(c->secret, sizeof c->secret, "%s", secret);
    const char *tr = opt->transport ? opt->transport : "auto";
    if (strlen(tr) >= sizeof c->transport)
        return mkv_fail(c, MKV_EINVAL, "unknown transport '%s'", tr);
    snprintf(c->transport, sizeof c->transport, "%s", tr);
    const char *sm = opt->shm_mode ? opt->shm_mode : "map";
    if (strcmp(sm, "map") != 0 && strcmp(sm, "fd") != 0)
        return mkv_fail(c, MKV_EINVAL, "unknown shm_mode '%s' (want map or fd)", sm);
    c->shm_mode = strcmp(sm, "fd") == 0 ? TE_SHM_FD : TE_SHM_MAP;
    if (opt->replicas < 0 || opt->replicas > PROTO_MAX_REPLICAS)
        return mkv_fail(c, MKV_EINVAL, "replicas must be 0 to %d", PROTO_MAX_REPLICAS);
    c->replicas = opt->replicas ? opt->replicas : 1;
    if (opt->copy_threads < 0 || opt->copy_threads > 64)
        return mkv_fail(c, MKV_EINVAL, "copy_threads must be 0 to 64");
    c->copy_threads = opt->copy_threads;
    c->timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : DEFAULT_TIMEOUT;
    if (opt->password) c->password = xstrdup(opt->password);
    if (opt->data_addrs) c->data_addrs = xstrdup(opt->data_addrs);
    if (from_etcd) {
        char err[ETCD_ERR_LEN];
        if (!(c->etcd = etcd_create(opt->etcd, ETCD_TIMEOUT_MS, err, sizeof err)))
            return mkv_fail(c, MKV_EINVAL, "%s", err);
        const char *name = opt->cluster_name && *opt->cluster_name ? opt->cluster_name : "moonkv";
        if (strlen(name) >= sizeof c->cluster)
            return mkv_fail(c, MKV_EINVAL, "cluster name longer than %zu bytes", sizeof c->cluster - 1);
        snprintf(c->cluster, sizeof c->cluster, "%s", name);
        if (!(c->watch = leader_watch_open(opt->etcd, c->cluster, err, sizeof err)))
            return mkv_fail(c, MKV_EINVAL, "%s", err);
    }
    return MKV_OK;
}

int mkv_connect(mkv_client **out, const mkv_options *opt) {
    mkv_options defaults;
    if (!out) return MKV_EINVAL;
    *out = NULL;
    if (!opt) {
        mkv_options_init(&defaults);
        opt = &defaults;
    }
    if (opt->groups) return mkv_route_connect(out, opt);
    mkv_client *c = xcalloc(1, sizeof *c);
    int rc = mkv_core_start(c, opt);
    if (rc == MKV_OK) rc = mkv_lane_options(c, opt);
    if (rc == MKV_OK && !c->etcd) {   /* etcd: at the first command */
        mkv_link_where(c, c->host, c->port);
        rc = mkv_link_open(c);
    }
    if (rc == MKV_OK) rc = mkv_engine_open(c);
    if (rc == MKV_OK) rc = mkv_topology_refresh(c);   /* tells the engine the nodes */
    if (rc != MKV_OK) {
        mkv_close(c);
        return rc;
    }
    *out = c;
    return MKV_OK;
}

workpool *mkv_crc_pool(mkv_client *c) {
    if (c->copy_threads == 1) return NULL;   /* the caller alone */
    if (!c->crc_pool)
        c->crc_pool = workpool_start(c->copy_threads ? c->copy_threads - 1 : workpool_helpers_for_cores(3));
    return c->crc_pool;
}

uint32_t mkv_checksum(mkv_client *c, const void *buf, size_t len) {
    return crc32c_parallel(len >= CRC32C_PARALLEL_MIN ? mkv_crc_pool(c) : NULL, buf, len);
}

typedef struct sum_job {
    const void *const *bufs;
    const size_t *lens;
    uint32_t *out;
} sum_job;

static void sum_small(void *arg, int i) {
    sum_job *j = arg;
    if (j->lens[i] < CRC32C_PARALLEL_MIN) j->out[i] = crc32c(0, j->bufs[i], j->lens[i]);
}

void mkv_checksum_many(mkv_client *c, const void *const *bufs, const size_t *lens, uint32_t *out,
                       size_t n) {
    size_t small = 0;
    for (size_t i = 0; i < n; i++)
        if (lens[i] < CRC32C_PARALLEL_MIN) small += lens[i];
    /* Small objects spread over the pool a whole object each; large ones
     * are split one at a time. */
    sum_job j = {.bufs = bufs, .lens = lens, .out = out};
    workpool_run(small >= CRC32C_PARALLEL_MIN ? mkv_crc_pool(c) : NULL, (int)n, sum_small, &j);
    for (size_t i = 0; i < n; i++)
        if (lens[i] >= CRC32C_PARALLEL_MIN) out[i] = mkv_checksum(c, bufs[i], lens[i]);
}

uint32_t mkv_checksum_slices(mkv_client *c, const void *buf, uint64_t len, proto_slices *sl) {
    const void **bufs = xcalloc(sl->count, sizeof *bufs);
    size_t *lens = xcalloc(sl->count, sizeof *lens);
    for (uint32_t i = 0; i < sl->count; i++) {
        uint64_t off = (uint64_t)i * sl->size;
        bufs[i] = (const char *)buf + off;
        lens[i] = (size_t)(len - off < sl->size ? len - off : sl->size);
    }
    mkv_checksum_many(c, bufs, lens, sl->crc, sl->count);
    uint32_t whole = sl->crc[0];
    for (uint32_t i = 1; i < sl->count; i++) whole = crc32c_combine(whole, sl->crc[i], lens[i]);
    free(bufs);
    free(lens);
    return whole;
}

void mkv_lane_free(mkv_client *c) {
    workpool_stop(c->crc_pool);
    mkv_leases_free(&c->done);
    mkv_recent_free(c);
    free(c->scratch);   /* its region is the core's, cleared before */
    leader_watch_close(c->watch);
    etcd_free(c->etcd);
    free(c->password);
    free(c->data_addrs);
}

/* No call may be running on c (the caller's promise, as for free()). */
void mkv_close(mkv_client *c) {
    if (!c) return;
    if (c->route) {
        mkv_route_close(c);
        return;
    }
    if (c->core) mkv_regions_clear(c);   /* every lane's scratch too */
    mkv_core_stop(c);
    mkv_lane_free(c);
    free(c);
}
