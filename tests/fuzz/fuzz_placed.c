/* fuzz_placed - the records of a MOON.MPUTSTART PACKED reply
 * (proto/placed.c), a peer's bytes: decoding never reads past the blob
 * nor leaks; what it accepts is in bounds (1..8 replicas, extents that
 * cover exactly the object, node ids 1..PROTO_MAX_NODES, caps naming
 * their own extent with write rights), and encoded again it decodes to
 * the same extents. Input: u32 object size (0 means 1), then the blob. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/le.h"
#include "proto/placed.h"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "fuzz-placed-key1";

static void check_bounds(const proto_placed *pl, uint64_t size) {
    if (pl->nreplicas == 0 || pl->nreplicas > PROTO_MAX_REPLICAS) abort();
    for (uint32_t r = 0; r < pl->nreplicas; r++) {
        uint64_t sum = 0;
        if (pl->next[r] == 0 || pl->next[r] > PROTO_MAX_EXTENTS) abort();
        for (uint32_t i = 0; i < pl->next[r]; i++) {
            const te_extent *e = &pl->ext[r][i];
            if (e->node_id == 0 || e->node_id > PROTO_MAX_NODES || e->length == 0) abort();
            if (e->cap.node_id != e->node_id || e->cap.offset != e->offset || e->cap.length != e->length ||
                !(e->cap.rights & TE_CAP_WRITE))
                abort();
            sum += e->length;
        }
        if (sum != size) abort();
    }
}

/* pl encoded as the master would, decoded again: the same extents. */
static void check_round_trip(const proto_placed *pl, uint64_t size) {
    obj_replica reps[PROTO_MAX_REPLICAS];
    for (uint32_t r = 0; r < pl->nreplicas; r++) {
        reps[r] = (obj_replica){pl->next[r], calloc(pl->next[r], sizeof(obj_extent))};
        if (!reps[r].extents) abort();
        for (uint32_t i = 0; i < pl->next[r]; i++)
            reps[r].extents[i] = (obj_extent){pl->ext[r][i].node_id, pl->ext[r][i].offset, pl->ext[r][i].length};
    }
    object o = {.size = size, .nreplicas = pl->nreplicas, .rep.list = reps, .rep_list = 1};
    proto_grant g = {TE_CAP_WRITE, pl->ext[0][0].cap.expiry_ms, KEY, pl->ext[0][0].cap.issued_us,
                     pl->ext[0][0].cap.term};
    resp_buf b;
    resp_buf_init(&b);
    proto_placed_put(&b, &o, &g);
    const uint8_t *p = (const uint8_t *)b.data;
    proto_placed again;
    proto_extbuf buf = {0};   /* its own: pl's extents stay where they are */
    if (proto_placed_next(&p, p + b.len, size, TE_CAP_WRITE, &buf, &again) != 0 || p != (const uint8_t *)b.data + b.len ||
        again.nreplicas != pl->nreplicas)
        abort();
    for (uint32_t r = 0; r < pl->nreplicas; r++) {
        if (again.next[r] != pl->next[r]) abort();
        for (uint32_t i = 0; i < pl->next[r]; i++)
            if (again.ext[r][i].node_id != pl->ext[r][i].node_id || again.ext[r][i].offset != pl->ext[r][i].offset ||
                again.ext[r][i].length != pl->ext[r][i].length)
                abort();
        free(reps[r].extents);
    }
    proto_extbuf_free(&buf);
    resp_buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 4) return 0;
    uint64_t osize = le_get32(data) ? le_get32(data) : 1;
    const uint8_t *p = data + 4, *end = data + size;
    proto_extbuf buf = {0};
    for (int rec = 0; rec < 64; rec++) {
        proto_placed pl;
        if (proto_placed_next(&p, end, osize, TE_CAP_WRITE, &buf, &pl) != 0) break;
        if (p > end) abort();
        if (pl.err) {
            if (pl.err < (const char *)data || pl.err + pl.errlen > (const char *)end) abort();
            continue;
        }
        check_bounds(&pl, osize);
        check_round_trip(&pl, osize);
    }
    proto_extbuf_free(&buf);
    return 0;
}
