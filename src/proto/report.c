/* proto/report.c - see report.h. */
#include "proto/report.h"

#include <string.h>

#include "backend/le.h"

size_t proto_report_put(uint8_t *out, const proto_report_rec *r) {
    int disk = r->seg_off == PROTO_REPORT_ON_DISK;
    le_put16(out, (uint16_t)r->keylen);
    out[2] = (uint8_t)r->want;
    out[3] = (uint8_t)((r->slices.count ? PROTO_REPORT_SLICES : 0) | (disk ? PROTO_REPORT_DISK : 0));
    le_put32(out + 4, r->crc);
    le_put64(out + 8, r->size);
    le_put64(out + 16, r->obj_off);
    le_put64(out + 24, disk ? 0 : r->seg_off);
    le_put64(out + 32, r->length);
    memcpy(out + PROTO_REPORT_HDR, r->key, r->keylen);
    if (r->slices.count) proto_slices_ref_copy(out + PROTO_REPORT_HDR + r->keylen, &r->slices);
    return proto_report_len(r);
}

int proto_report_next(const uint8_t **p, const uint8_t *end, proto_report_rec *r) {
    const uint8_t *at = *p;
    if (at > end || (size_t)(end - at) < PROTO_REPORT_HDR) return -1;
    size_t keylen = le_get16(at);
    if (keylen == 0 || keylen > PROTO_MAX_KEY_LEN || (size_t)(end - at) - PROTO_REPORT_HDR < keylen) return -1;
    r->keylen = keylen;
    r->want = at[2];
    r->crc = le_get32(at + 4);
    r->size = le_get64(at + 8);
    r->obj_off = le_get64(at + 16);
    r->seg_off = le_get64(at + 24);
    r->length = le_get64(at + 32);
    r->key = (const char *)at + PROTO_REPORT_HDR;
    unsigned flags = at[3];
    if (flags > (PROTO_REPORT_SLICES | PROTO_REPORT_DISK) || r->want > PROTO_MAX_REPLICAS ||
        r->size > PROTO_MAX_SEGMENT ||
        r->obj_off > PROTO_MAX_SEGMENT || r->seg_off > PROTO_MAX_SEGMENT || r->length > PROTO_MAX_SEGMENT)
        return -1;
    if (flags & PROTO_REPORT_DISK) {   /* the whole object, a share's piece, or a share from before pieces */
        if (r->seg_off != 0 || r->obj_off > r->size || r->length > r->size - r->obj_off) return -1;
        r->seg_off = PROTO_REPORT_ON_DISK;
    }
    const uint8_t *next = at + PROTO_REPORT_HDR + keylen;
    r->slices = (proto_slices_ref){0, 0, NULL};
    if (flags & PROTO_REPORT_SLICES) {
        size_t got = proto_slices_ref_get(next, (size_t)(end - next), r->size, &r->slices);
        if (got == 0) return -1;
        next += got;
    }
    *p = next;
    return 0;
}
