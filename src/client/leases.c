/* client/leases.c - giving read leases back.
 *
 * A MOON.GET leases the object's bytes so the master does not reuse them
 * while we read. Once the read is over (whatever its outcome) the lease
 * goes back, so a removed object's space is free as soon as no read is
 * in flight rather than when the lease times out. Leases are returned in
 * one MOON.RELEASE (a run of one expiry: MOON.MRELEASE) pipelined ahead of
 * the next master command: no round trip of its own. A lease is named by key and expiry (its read caps'),
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

/* A run of this many leases of one expiry (a batch get's keys share
 * theirs) goes as one MOON.MRELEASE: no number per key to format, send
 * and parse. Shorter runs share MOON.RELEASEs. */
#define MRELEASE_RUN 4

/* One MOON.RELEASE for leases v[idx[0..n)] into o. */
static void add_release(mkv_out *o, const mkv_lease *v, const size_t *idx, size_t n) {
    proto_cmd cmd;
    proto_cmd_release_begin(&cmd, n);
    for (size_t i = 0; i < n; i++) proto_cmd_release_add(&cmd, v[idx[i]].key, v[idx[i]].keylen, v[idx[i]].until);
    mkv_out_add(o, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
}

/* One MOON.MRELEASE for leases v[0..n), all of v[0]'s expiry, into o. */
static void add_mrelease(mkv_out *o, const mkv_lease *v, size_t n) {
    proto_cmd cmd;
    proto_cmd_mrelease_begin(&cmd, v[0].until, n);
    for (size_t i = 0; i < n; i++) proto_cmd_bin(&cmd, v[i].key, v[i].keylen);
    mkv_out_add(o, cmd.argc, cmd.argv, cmd.lens);
    proto_cmd_free(&cmd);
}

int mkv_leases_add(mkv_client *c, mkv_out *o) { return mkv_leases_out(&c->done, o); }

int mkv_leases_out(mkv_leases *d, mkv_out *o) {
    int queued = 0;
    size_t *rest = d->n ? xmalloc(d->n * sizeof *rest) : NULL, nrest = 0;
    for (size_t at = 0, run; at < d->n; at += run) {
        for (run = 1; at + run < d->n && run < PROTO_MAX_BATCH && d->v[at + run].until == d->v[at].until;) run++;
        if (run >= MRELEASE_RUN) {
            add_mrelease(o, d->v + at, run);
            queued++;
        } else {
            for (size_t i = at; i < at + run; i++) rest[nrest++] = i;
        }
    }
    for (size_t at = 0; at < nrest; at += PROTO_MAX_BATCH) {
        add_release(o, d->v, rest + at, nrest - at < PROTO_MAX_BATCH ? nrest - at : PROTO_MAX_BATCH);
        queued++;
    }
    free(rest);
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
