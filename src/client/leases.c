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
    mkv_lease_keep(&c->done, key, keylen, mkv_lease_until(pl));
}

void mkv_lease_keep(mkv_leases *d, const void *key, size_t keylen, uint64_t until) {
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

/* One MOON.RELEASE for leases v[0..n) into o. */
static void add_one(mkv_out *o, const mkv_lease *v, size_t n) {
    proto_cmd cmd;
    proto_cmd_release_begin(&cmd, n);
    for (size_t i = 0; i < n; i++) proto_cmd_release_add(&cmd, v[i].key, v[i].keylen, v[i].until);
    mkv_out_add(o, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
}

int mkv_leases_add(mkv_client *c, mkv_out *o) { return mkv_leases_out(&c->done, o); }

int mkv_leases_out(mkv_leases *d, mkv_out *o) {
    int queued = 0;
    for (size_t at = 0; at < d->n; at += PROTO_MAX_BATCH) {
        size_t n = d->n - at < PROTO_MAX_BATCH ? d->n - at : PROTO_MAX_BATCH;
        add_one(o, d->v + at, n);
        queued++;
    }
    mkv_leases_clear(d);   /* sent or not, never twice */
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
