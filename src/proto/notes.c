/* proto/notes.c - see notes.h. */
#include "proto/notes.h"

#include <stdlib.h>
#include <string.h>

#include "backend/le.h"
#include "core/util.h"

#define NOTE_HOLD 0
#define NOTE_DROP 1
#define NOTE_HOLD_SLICES 2

void proto_note_put(resp_buf *b, int drop, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                    uint32_t want, const obj_replica *rep, const proto_slices *sl) {
    uint8_t h[PROTO_NOTE_HOLD_HDR];
    int sliced = !drop && sl && sl->count > 0;
    h[0] = drop ? NOTE_DROP : sliced ? NOTE_HOLD_SLICES : NOTE_HOLD;
    h[1] = drop ? drop == PROTO_NOTE_DROP_DISK : (uint8_t)want;
    le_put16(h + 2, (uint16_t)keylen);
    if (drop) {
        resp_buf_append(b, h, PROTO_NOTE_DROP_HDR);
        resp_buf_append(b, key, keylen);
        return;
    }
    le_put32(h + 4, crc);
    le_put64(h + 8, size);
    le_put16(h + 16, (uint16_t)rep->nextents);
    resp_buf_append(b, h, sizeof h);
    resp_buf_append(b, key, keylen);
    for (uint32_t i = 0; i < rep->nextents; i++) {
        uint8_t e[PROTO_NOTE_EXTENT];
        le_put32(e, rep->extents[i].node);
        le_put64(e + 4, rep->extents[i].offset);
        le_put64(e + 12, rep->extents[i].length);
        resp_buf_append(b, e, sizeof e);
    }
    if (!sliced) return;
    uint8_t *t = xmalloc(proto_slices_ref_len(sl->count));
    resp_buf_append(b, t, proto_slices_ref_put(t, sl->size, sl->count, sl->crc));
    free(t);
}

/* A hold's bytes without its slice CRCs. */
static size_t hold_len(const uint8_t *rec) {
    return PROTO_NOTE_HOLD_HDR + le_get16(rec + 2) + (size_t)le_get16(rec + 16) * PROTO_NOTE_EXTENT;
}

size_t proto_note_len(const uint8_t *rec) {
    if (rec[0] == NOTE_DROP) return PROTO_NOTE_DROP_HDR + le_get16(rec + 2);
    size_t len = hold_len(rec);
    return rec[0] == NOTE_HOLD_SLICES ? len + proto_slices_ref_len(le_get16(rec + len + 8)) : len;
}

void proto_notes_plain(const uint8_t *recs, size_t len, resp_buf *out) {
    for (const uint8_t *p = recs, *end = recs + len; p < end; p += proto_note_len(p)) {
        if (p[0] != NOTE_HOLD_SLICES) {
            resp_buf_append(out, p, proto_note_len(p));
            continue;
        }
        uint8_t kind = NOTE_HOLD;
        resp_buf_append(out, &kind, 1);
        resp_buf_append(out, p + 1, hold_len(p) - 1);
    }
}

/* n extents at p into ext: -1 if one breaks a bound. */
static int extents_of(const uint8_t *p, uint32_t n, obj_extent *ext) {
    for (uint32_t i = 0; i < n; i++, p += PROTO_NOTE_EXTENT) {
        obj_extent *e = &ext[i];
        e->node = le_get32(p);
        e->offset = le_get64(p + 4);
        e->length = le_get64(p + 12);
        if (e->node == 0 || e->offset > PROTO_MAX_SEGMENT || e->length == 0 || e->length > PROTO_MAX_SEGMENT)
            return -1;
    }
    return 0;
}

int proto_note_next(const uint8_t **p, const uint8_t *end, obj_extent *ext, proto_note *out) {
    const uint8_t *at = *p;
    if (at > end || (size_t)(end - at) < PROTO_NOTE_DROP_HDR || at[0] > NOTE_HOLD_SLICES) return -1;
    size_t left = (size_t)(end - at), keylen = le_get16(at + 2);
    if (keylen == 0 || keylen > PROTO_MAX_KEY_LEN) return -1;
    memset(out, 0, sizeof *out);
    out->keylen = keylen;
    if (at[0] == NOTE_DROP) {
        if (at[1] > 1 || left - PROTO_NOTE_DROP_HDR < keylen) return -1;
        out->drop = at[1] ? PROTO_NOTE_DROP_DISK : 1;
        out->key = (const char *)at + PROTO_NOTE_DROP_HDR;
        *p = at + PROTO_NOTE_DROP_HDR + keylen;
        return 0;
    }
    if (left < PROTO_NOTE_HOLD_HDR || left - PROTO_NOTE_HOLD_HDR < keylen) return -1;
    uint32_t n = le_get16(at + 16);
    size_t body = keylen + (size_t)n * PROTO_NOTE_EXTENT;
    out->want = at[1];
    out->crc = le_get32(at + 4);
    out->size = le_get64(at + 8);
    if (out->want > PROTO_MAX_REPLICAS || out->size == 0 || out->size > PROTO_MAX_SEGMENT || n == 0 ||
        n > PROTO_MAX_EXTENTS || left - PROTO_NOTE_HOLD_HDR < body)
        return -1;
    const uint8_t *key = at + PROTO_NOTE_HOLD_HDR;
    if (extents_of(key + keylen, n, ext) != 0) return -1;
    out->key = (const char *)key;
    out->rep = (obj_replica){n, ext};
    const uint8_t *next = key + body;
    if (at[0] == NOTE_HOLD_SLICES) {
        size_t got = proto_slices_ref_get(next, (size_t)(end - next), out->size, &out->slices);
        if (got == 0) return -1;
        next += got;
    }
    *p = next;
    return 0;
}
