/* fuzz_located - the records of a MOON.MGETPACKED reply (proto/located.c),
 * a peer's bytes: decoding never reads past the blob nor leaks; what it
 * accepts is in bounds (a size of 1..INT64_MAX, 1..8 replicas, extents
 * that cover exactly the object, node ids 1..PROTO_MAX_NODES, caps naming
 * their own extent with read rights, slice CRCs that fit the object and
 * combine to its CRC), and encoded again it decodes to the same record.
 * Input: the blob. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/located.h"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "fuzz-located-ky1";

static void check_bounds(const proto_located *l) {
    if (l->size == 0 || l->size > INT64_MAX) abort();
    if (proto_slices_check(&l->slices, l->size, l->crc, NULL, 0) != 0) abort();
    if (l->rep.err || l->rep.nreplicas == 0 || l->rep.nreplicas > PROTO_MAX_REPLICAS) abort();
    for (uint32_t r = 0; r < l->rep.nreplicas; r++) {
        uint64_t sum = 0;
        if (l->rep.next[r] == 0 || l->rep.next[r] > PROTO_MAX_EXTENTS) abort();
        for (uint32_t i = 0; i < l->rep.next[r]; i++) {
            const te_extent *e = &l->rep.ext[r][i];
            if (e->node_id == 0 || e->node_id > PROTO_MAX_NODES || e->length == 0) abort();
            if (e->cap.node_id != e->node_id || e->cap.offset != e->offset || e->cap.length != e->length ||
                !proto_rights_ok(e->cap.rights, TE_CAP_READ))   /* a disk cap serves a read too */
                abort();
            sum += e->length;
        }
        if (sum != l->size) abort();
    }
}

static int same_extents(const proto_located *a, const proto_located *b) {
    if (a->rep.nreplicas != b->rep.nreplicas) return 0;
    for (uint32_t r = 0; r < a->rep.nreplicas; r++) {
        if (a->rep.next[r] != b->rep.next[r]) return 0;
        for (uint32_t i = 0; i < a->rep.next[r]; i++) {
            const te_extent *x = &a->rep.ext[r][i], *y = &b->rep.ext[r][i];
            if (x->node_id != y->node_id || x->offset != y->offset || x->length != y->length) return 0;
        }
    }
    return 1;
}

/* l encoded as the master would, decoded again: the same record. */
static void check_round_trip(const proto_located *l) {
    obj_replica reps[PROTO_MAX_REPLICAS];
    for (uint32_t r = 0; r < l->rep.nreplicas; r++) {
        reps[r] = (obj_replica){l->rep.next[r], calloc(l->rep.next[r], sizeof(obj_extent))};
        if (!reps[r].extents) abort();
        for (uint32_t i = 0; i < l->rep.next[r]; i++)
            reps[r].extents[i] = (obj_extent){l->rep.ext[r][i].node_id, l->rep.ext[r][i].offset,
                                              l->rep.ext[r][i].length};
    }
    object o = {.size = l->size, .crc = l->crc, .nreplicas = l->rep.nreplicas, .rep.list = reps, .rep_list = 1};
    const te_cap *c = &l->rep.ext[0][0].cap;
    proto_grant g = {TE_CAP_READ, c->expiry_ms, KEY, c->issued_us, c->term};
    resp_buf b;
    resp_buf_init(&b);
    proto_located_put(&b, &o, &l->slices, &g);
    const uint8_t *p = (const uint8_t *)b.data;
    proto_located again;
    proto_extbuf buf = {0};   /* its own: l's extents stay where they are */
    if (proto_located_next(&p, p + b.len, &buf, &again) != 0 || p != (const uint8_t *)b.data + b.len || !again.found ||
        again.size != l->size || again.crc != l->crc || again.slices.size != l->slices.size ||
        again.slices.count != l->slices.count ||
        (l->slices.count && memcmp(again.slices.crc, l->slices.crc, 4 * (size_t)l->slices.count) != 0) ||
        !same_extents(&again, l))
        abort();
    for (uint32_t r = 0; r < l->rep.nreplicas; r++) free(reps[r].extents);
    proto_located_free(&again);
    proto_extbuf_free(&buf);
    resp_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    proto_extbuf buf = {0};
    for (int rec = 0; rec < 64; rec++) {
        proto_located l;
        if (proto_located_next(&p, end, &buf, &l) != 0) break;
        if (p > end) abort();
        if (!l.found) {
            if (l.rep.nreplicas || l.slices.crc) abort();
            continue;
        }
        check_bounds(&l);
        check_round_trip(&l);
        proto_located_free(&l);
    }
    proto_extbuf_free(&buf);
    return 0;
}
