/* client/pins.c - a prefix lookup that pins its hits (MOON.PREFIXPIN,
 * MOON.UNPIN: proto/pins.h), so the objects it found are still there when
 * the engine loads them. The pin's id is drawn here (random, nonzero,
 * below 2^63) unless the caller brings one; every chunk of a long lookup
 * goes under the same id. */
#include <stdlib.h>
#include <sys/random.h>

#include "client/client.h"
#include "core/util.h"
#include "proto/pins.h"
#include "proto/replies.h"

#define PIN_ID_MASK (UINT64_MAX >> 1)   /* ids are 1 to 2^63-1 */

static uint64_t draw_id(void) {
    uint64_t id = 0;
    while ((id & PIN_ID_MASK) == 0)
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) id = mono_us() ^ (uint64_t)rand() << 20;
    return id & PIN_ID_MASK;
}

/* MOON.PREFIXPIN over one chunk: how many leading keys are present (and now pinned). */
static int prefixpin_run(mkv_client *c, uint64_t id, uint32_t ms, const mkv_obj *objs, size_t n,
                         size_t *count) {
    proto_cmd cmd;
    proto_cmd_prefixpin_begin(&cmd, id, ms, n);
    int rc;
    redisReply *r = mkv_keys_run(c, &cmd, objs, n, &rc);
    if (!r) return rc;
    rc = mkv_prefix_count(c, PROTO_VERB_PREFIXPIN, r, n, count);
    freeReplyObject(r);
    return rc;
}

int mkv_exists_prefix_pin(mkv_client *c, const mkv_obj *objs, size_t n, uint32_t pin_ms, uint64_t *pin,
                          size_t *count) {
    if (!c || !count || !pin || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_refused(c, "a pinned prefix"));
    MKV_ON_LANE(c);
    *count = 0;
    if (pin_ms == 0 || pin_ms > PROTO_PIN_MAX_MS)
        return mkv_fail(c, MKV_EINVAL, "pin time must be 1 to %u ms", PROTO_PIN_MAX_MS);
    if (*pin > PIN_ID_MASK) return mkv_fail(c, MKV_EINVAL, "pin id must be below 2^63");
    if (*pin == 0) *pin = draw_id();
    for (size_t i = 0; i < n; i += PROTO_MAX_BATCH) {
        size_t chunk = n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, hit = 0;
        int rc = prefixpin_run(c, *pin, pin_ms, objs + i, chunk, &hit);
        if (rc != MKV_OK) return rc;   /* chunks pinned before stay under *pin: unpin it */
        *count += hit;
        if (hit < chunk) break;
    }
    return MKV_OK;
}

int mkv_unpin(mkv_client *c, uint64_t pin, size_t *keys) {
    if (!c || pin == 0 || pin > PIN_ID_MASK) return c ? mkv_fail(c, MKV_EINVAL, "no such pin id") : MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_refused(c, "unpin"));
    MKV_ON_LANE(c);
    proto_cmd cmd;
    proto_cmd_unpin(&cmd, pin);
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    if (!r) return rc;
    long long n;
    if (proto_dec_int(r, 0, INT64_MAX, &n) == 0) {
        if (keys) *keys = (size_t)n;
    } else {
        rc = mkv_bad_reply(c, PROTO_VERB_UNPIN, r);
    }
    freeReplyObject(r);
    return rc;
}
