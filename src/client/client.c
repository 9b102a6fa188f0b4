/* client/client.c - the client's life cycle and its master connection
 * (errors.c maps the master's replies to MKV_E* codes). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/crc32c.h"
#include "core/util.h"
#include "core/workpool.h"

#define DEFAULT_MASTER  "127.0.0.1:7380"
#define DEFAULT_TIMEOUT 5000

void mkv_options_init(mkv_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->master = DEFAULT_MASTER;
    opt->transport = "auto";
    opt->replicas = 1;
    opt->timeout_ms = DEFAULT_TIMEOUT;
}

/* Why the last mkv_connect of this thread failed: there is no client
 * left to hold it. */
static __thread char connect_err[MKV_ERR_LEN];

const char *mkv_last_error(const mkv_client *c) {
    return c ? c->err : connect_err;
}

/* ---- the master connection ---- */

static int master_auth(mkv_client *c) {
    if (!c->password) return MKV_OK;
    const char *argv[2] = {"AUTH", c->password};
    size_t lens[2] = {4, strlen(c->password)};
    int code;
    redisReply *r = mkv_command(c, 2, argv, lens, &code);
    if (!r) return code;
    int rc = MKV_OK;
    if (r->type == REDIS_REPLY_ERROR) rc = mkv_fail(c, MKV_EAUTH, "master: %s", r->str);
    else if (r->type != REDIS_REPLY_STATUS) rc = mkv_bad_reply(c, "AUTH", r);
    freeReplyObject(r);
    return rc;
}

static int master_open(mkv_client *c) {
    struct timeval tv = {c->timeout_ms / 1000, (c->timeout_ms % 1000) * 1000};
    if (c->rc) redisFree(c->rc);
    c->rc = redisConnectWithTimeout(c->host, c->port, tv);
    if (!c->rc) return mkv_fail(c, MKV_ENOMEM, "cannot allocate a connection");
    if (c->rc->err) {
        int rc = mkv_fail(c, MKV_ECONN, "master %s:%d: %s", c->host, c->port, c->rc->errstr);
        redisFree(c->rc);
        c->rc = NULL;
        return rc;
    }
    redisSetTimeout(c->rc, tv);
    return master_auth(c);
}

redisReply *mkv_command(mkv_client *c, int argc, const char **argv, const size_t *argvlen,
                        int *code) {
    /* A connection an earlier command broke is reopened before the next
     * one (the master may have restarted); a command whose reply was lost
     * is never sent twice, since it may have taken effect. */
    if ((!c->rc || c->rc->err) && (*code = master_open(c)) != MKV_OK) return NULL;
    redisReply *r = NULL;
    int released = mkv_leases_append(c);
    if (redisAppendCommandArgv(c->rc, argc, argv, argvlen) == REDIS_OK) {
        void *rr = NULL;
        /* MOON.RELEASE's reply first: only a broken link can make it fail. */
        if (!released || redisGetReply(c->rc, &rr) == REDIS_OK) {
            freeReplyObject(rr);
            if (redisGetReply(c->rc, &rr) == REDIS_OK) r = rr;
        }
    }
    *code = MKV_OK;
    if (r) return r;
    int timed_out = c->rc->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
    *code = mkv_fail(c, timed_out ? MKV_ETIMEDOUT : MKV_ECONN, "master %s:%d: %s", c->host,
                     c->port, c->rc->errstr);
    redisFree(c->rc);
    c->rc = NULL;
    return NULL;
}

/* ---- connect / close ---- */

static int copy_options(mkv_client *c, const mkv_options *opt) {
    const char *master = opt->master ? opt->master : DEFAULT_MASTER;
    if (parse_hostport(master, c->host, sizeof c->host, &c->port) != 0)
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
    c->timeout_ms = opt->timeout_ms > 0 ? opt->timeout_ms : DEFAULT_TIMEOUT;
    if (opt->password) c->password = xstrdup(opt->password);
    if (opt->data_addrs) c->data_addrs = xstrdup(opt->data_addrs);
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
    mkv_client *c = xcalloc(1, sizeof *c);
    int rc = copy_options(c, opt);
    if (rc == MKV_OK) rc = master_open(c);
    if (rc == MKV_OK) rc = mkv_engine_open(c);
    if (rc == MKV_OK) rc = mkv_topology_refresh(c);   /* tells the engine the nodes */
    if (rc != MKV_OK) {
        memcpy(connect_err, c->err, sizeof connect_err);
        mkv_close(c);
        return rc;
    }
    *out = c;
    return MKV_OK;
}

static workpool *crc_pool(mkv_client *c) {
    if (!c->crc_pool) c->crc_pool = workpool_start(workpool_helpers_for_cores(3));
    return c->crc_pool;
}

uint32_t mkv_checksum(mkv_client *c, const void *buf, size_t len) {
    return crc32c_parallel(len >= CRC32C_PARALLEL_MIN ? crc_pool(c) : NULL, buf, len);
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
    workpool_run(small >= CRC32C_PARALLEL_MIN ? crc_pool(c) : NULL, (int)n, sum_small, &j);
    for (size_t i = 0; i < n; i++)
        if (lens[i] >= CRC32C_PARALLEL_MIN) out[i] = mkv_checksum(c, bufs[i], lens[i]);
}

void mkv_close(mkv_client *c) {
    if (!c) return;
    workpool_stop(c->crc_pool);
    mkv_leases_clear(&c->done);
    mkv_regions_clear(c);
    mkv_engine_close(c);
    mkv_topology_free(&c->topo);
    if (c->rc) redisFree(c->rc);
    free(c->password);
    free(c->data_addrs);
    free(c);
}
