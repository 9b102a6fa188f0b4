/* proto/located.c - see located.h. */
#include "proto/located.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/le.h"
#include "core/util.h"
#include "proto/limits.h"

#define LOCATED_FOUND   0
#define LOCATED_MISSING 2

#define HEAD_LEN (1 + 8 + 4 + 8 + 4)   /* tag, size, crc, slice size, count */

void proto_located_put(resp_buf *b, const object *o, const proto_slices *sl, const proto_grant *g) {
    uint8_t head[HEAD_LEN] = {LOCATED_FOUND};
    le_put64(head + 1, o->size);
    le_put32(head + 9, o->crc);
    le_put64(head + 13, sl->count ? sl->size : 0);
    le_put32(head + 21, sl->count);
    resp_buf_append(b, head, sizeof head);
    for (uint32_t i = 0; i < sl->count; i++) {
        uint8_t crc[4];
        le_put32(crc, sl->crc[i]);
        resp_buf_append(b, crc, sizeof crc);
    }
    proto_replicas_put(b, o, g);
}

void proto_located_put_missing(resp_buf *b) {
    uint8_t tag = LOCATED_MISSING;
    resp_buf_append(b, &tag, 1);
}

void proto_located_free(proto_located *l) {
    proto_slices_free(&l->slices);
    memset(l, 0, sizeof *l);
}

/* The slice CRCs at *p: the same checks as the array form's. */
static int slices_next(const uint8_t **p, const uint8_t *end, uint64_t size, uint32_t crc,
                       uint64_t slice, uint32_t count, proto_slices *out) {
    if (slice == 0 && count == 0) return 0;   /* none kept: the usual small object */
    if (count > PROTO_MAX_SLICES || (size_t)(end - *p) / 4 < count) return -1;
    char num[24];
    int n = snprintf(num, sizeof num, "%llu", (unsigned long long)slice);
    if (proto_slices_parse(num, (size_t)n, *p, (size_t)count * 4, out, NULL, 0) != 0) return -1;
    if (proto_slices_check(out, size, crc, NULL, 0) != 0) {
        proto_slices_free(out);
        return -1;
    }
    *p += (size_t)count * 4;
    return 0;
}

int proto_located_next(const uint8_t **p, const uint8_t *end, proto_extbuf *buf, proto_located *out) {
    memset(out, 0, sizeof *out);
    const uint8_t *at = *p;
    if (at >= end) return -1;
    if (at[0] == LOCATED_MISSING) {
        *p = at + 1;
        return 0;
    }
    if (at[0] != LOCATED_FOUND || end - at < HEAD_LEN) return -1;
    out->size = le_get64(at + 1);
    out->crc = le_get32(at + 9);
    uint64_t slice = le_get64(at + 13);
    uint32_t count = le_get32(at + 21);
    at += HEAD_LEN;
    if (out->size == 0 || out->size > INT64_MAX ||
        slices_next(&at, end, out->size, out->crc, slice, count, &out->slices) != 0)
        return -1;
    if (proto_replicas_next(&at, end, out->size, TE_CAP_READ, buf, &out->rep) != 0) {
        proto_located_free(out);
        return -1;
    }
    out->found = 1;
    *p = at;
    return 0;
}
