/* client/leases.c - giving read leases back.
 *
 * A MOON.GET leases the object's bytes so the master does not reuse them
 * while we read. Once the read is over (whatever its outcome) the lease
 * goes back, so a removed object's space is free as soon as no read is
 * in flight rather than when the lease times out. Leases are returned in
 * one MOON.RELEASE pipelined ahead of the next master command: no round
 * trip of its own. A lease is named by key and expiry (its read caps'),
 * which the master matches against the leases it handed out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"

/* The expiry of the caps behind pl (all of one lease share it). */
uint64_t mkv_lease_until(const mkv_placement *pl) {
    if (pl->nreplicas == 0 || pl->replicas[0].nextents == 0) return 0;
    return pl->replicas[0].extents[0].cap.expiry_ms;
}

void mkv_lease_done(mkv_client *c, const void *key, size_t keylen, const mkv_placement *pl) {
    uint64_t until = mkv_lease_until(pl);
    mkv_leases *d = &c->done;
    if (!until || d->n == MKV_MAX_DONE_LEASES) return;
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 64;
        d->v = xrealloc(d->v, d->cap * sizeof *d->v);
    }
    mkv_lease *l = &d->v[d->n++];
    l->key = xmemdup(key, keylen);
    l->keylen = keylen;
    l->until = until;
}

/* One MOON.RELEASE for leases v[0..n); 1 if queued. */
static int append_one(mkv_client *c, const mkv_lease *v, size_t n) {
    int argc = (int)(1 + 2 * n);
    const char **argv = xcalloc((size_t)argc, sizeof *argv);
    size_t *lens = xcalloc((size_t)argc, sizeof *lens);
    char (*num)[24] = xcalloc(n, sizeof *num);
    argv[0] = "MOON.RELEASE";
    lens[0] = 12;
    for (size_t i = 0; i < n; i++) {
        argv[1 + 2 * i] = v[i].key;
        lens[1 + 2 * i] = v[i].keylen;
        lens[2 + 2 * i] = (size_t)snprintf(num[i], sizeof num[i], "%llu", (unsigned long long)v[i].until);
        argv[2 + 2 * i] = num[i];
    }
    int ok = redisAppendCommandArgv(c->rc, argc, argv, lens) == REDIS_OK;
    free(argv);
    free(lens);
    free(num);
    return ok;
}

int mkv_leases_append(mkv_client *c) {
    int queued = 0;
    for (size_t at = 0; at < c->done.n; at += PROTO_MAX_BATCH) {
        size_t n = c->done.n - at < PROTO_MAX_BATCH ? c->done.n - at : PROTO_MAX_BATCH;
        if (!append_one(c, c->done.v + at, n)) break;
        queued++;
    }
    mkv_leases_clear(&c->done);   /* sent or not, never twice */
    return queued;
}

void mkv_leases_clear(mkv_leases *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i].key);
    l->n = 0;
}

void mkv_leases_free(mkv_leases *l) {
    mkv_leases_clear(l);
    free(l->v);
    *l = (mkv_leases){0};
}
