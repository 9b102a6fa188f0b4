/* fuzz_notes - the records of a MOON.HOLDINGS PACKED reply
 * (proto/notes.c), a peer's bytes: decoding never reads past the blob;
 * what it accepts is in bounds (key 1..PROTO_MAX_KEY_LEN bytes inside
 * the blob, want <= PROTO_MAX_REPLICAS, 1..PROTO_MAX_EXTENTS extents on
 * nodes >= 1, lengths >= 1), and encoded again it gives the same bytes.
 * Input: the blob. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/notes.h"

static obj_extent ext[PROTO_MAX_EXTENTS];

static void check_bounds(const proto_note *n, const uint8_t *data, const uint8_t *end) {
    if (n->keylen == 0 || n->keylen > PROTO_MAX_KEY_LEN || (const uint8_t *)n->key < data ||
        (const uint8_t *)n->key + n->keylen > end)
        abort();
    if (n->drop) return;
    if (n->want > PROTO_MAX_REPLICAS || n->size == 0 || n->size > PROTO_MAX_SEGMENT ||
        n->rep.nextents == 0 || n->rep.nextents > PROTO_MAX_EXTENTS || n->rep.extents != ext)
        abort();
    for (uint32_t i = 0; i < n->rep.nextents; i++)
        if (ext[i].node == 0 || ext[i].length == 0 || ext[i].length > PROTO_MAX_SEGMENT ||
            ext[i].offset > PROTO_MAX_SEGMENT)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    resp_buf b;
    resp_buf_init(&b);
    while (p < end) {
        const uint8_t *at = p;
        proto_note n;
        if (proto_note_next(&p, end, ext, &n) != 0) break;
        if (p <= at || p > end) abort();
        check_bounds(&n, data, end);
        resp_buf_clear(&b);
        proto_slices sl = {0, 0, NULL};
        if (n.slices.count) proto_slices_from_ref(&n.slices, &sl);
        proto_note_put(&b, n.drop, n.key, n.keylen, n.size, n.crc, n.want, &n.rep, &sl);
        proto_slices_free(&sl);
        if (b.len != (size_t)(p - at) || memcmp(b.data, at, b.len) != 0) abort();
    }
    resp_buf_free(&b);
    return 0;
}
