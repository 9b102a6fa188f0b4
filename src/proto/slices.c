/* proto/slices.c - see slices.h. */
#include "proto/slices.h"

#include <hiredis/hiredis.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/le.h"
#include "core/crc32c.h"
#include "core/util.h"

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

uint64_t proto_slice_count(uint64_t size, uint64_t slice) {
    return size / slice + (size % slice != 0);
}

uint64_t proto_slice_choose(uint64_t size) {
    uint64_t slice = PROTO_SLICE_WRITE;
    while (slice < PROTO_SLICE_MAX && proto_slice_count(size, slice) > PROTO_MAX_SLICES) slice <<= 1;
    return proto_slice_count(size, slice) > 1 ? slice : 0;
}

/* Digits only, no sign, at most max: 0 and *out, or -1. */
static int parse_dec(const char *s, size_t n, uint64_t max, uint64_t *out) {
    if (n == 0 || n > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static int slice_size_ok(uint64_t v) {
    return v >= PROTO_SLICE_MIN && v <= PROTO_SLICE_MAX && (v & (v - 1)) == 0;
}

/* The packed list into a fresh array (its length checked by the caller). */
static uint32_t *unpack(const uint8_t *p, uint32_t n) {
    uint32_t *crc = xmalloc((n ? n : 1) * sizeof *crc);
    for (uint32_t i = 0; i < n; i++) crc[i] = le_get32(p + 4 * (size_t)i);
    return crc;
}

int proto_slices_parse(const char *size_arg, size_t size_len, const void *blob, size_t bloblen,
                       proto_slices *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    uint64_t v;
    if (parse_dec(size_arg, size_len, PROTO_SLICE_MAX, &v) != 0 || (v != 0 && !slice_size_ok(v)))
        return fail(err, errlen, "slice size must be 0 or a power of two from %llu to %llu",
                    (unsigned long long)PROTO_SLICE_MIN, (unsigned long long)PROTO_SLICE_MAX);
    if (bloblen % 4)
        return fail(err, errlen, "slice CRCs must be 4 bytes each, got %zu bytes", bloblen);
    if (bloblen / 4 > PROTO_MAX_SLICES)
        return fail(err, errlen, "at most %d slice CRCs", PROTO_MAX_SLICES);
    if ((v == 0) != (bloblen == 0))
        return fail(err, errlen, "slice size 0 goes with no slice CRCs, and only it");
    out->size = v;
    out->count = (uint32_t)(bloblen / 4);
    out->crc = out->count ? unpack(blob, out->count) : NULL;
    return 0;
}

int proto_slices_check(const proto_slices *s, uint64_t size, uint32_t crc, char *err, size_t errlen) {
    if (s->count == 0) return 0;
    uint64_t want = proto_slice_count(size, s->size);
    if (want != s->count)
        return fail(err, errlen, "%u slice CRCs for %llu slices of %llu bytes", s->count,
                    (unsigned long long)want, (unsigned long long)s->size);
    uint32_t all = s->crc[0];
    for (uint32_t i = 1; i < s->count; i++) {
        uint64_t len = i + 1 < s->count ? s->size : size - (uint64_t)i * s->size;
        all = crc32c_combine(all, s->crc[i], len);
    }
    if (all != crc) return fail(err, errlen, "slice CRCs do not combine to the object's CRC %u", crc);
    return 0;
}

void proto_slices_pack(const proto_slices *s, uint8_t *out) {
    for (uint32_t i = 0; i < s->count; i++) le_put32(out + 4 * (size_t)i, s->crc[i]);
}

int proto_slices_decode(const redisReply *slice, const redisReply *list, uint64_t size, uint32_t crc,
                        proto_slices *out) {
    memset(out, 0, sizeof *out);
    if (!slice || !list || slice->type != REDIS_REPLY_INTEGER || list->type != REDIS_REPLY_STRING) return -1;
    if (slice->integer < 0) return -1;
    char num[24];
    int n = snprintf(num, sizeof num, "%lld", slice->integer);
    if (proto_slices_parse(num, (size_t)n, list->str, list->len, out, NULL, 0) != 0) return -1;
    if (proto_slices_check(out, size, crc, NULL, 0) == 0) return 0;
    proto_slices_free(out);
    return -1;
}

void proto_slices_free(proto_slices *s) {
    free(s->crc);
    memset(s, 0, sizeof *s);
}

size_t proto_slices_ref_put(uint8_t *out, uint64_t size, uint32_t count, const uint32_t *crc) {
    le_put64(out, size);
    le_put16(out + 8, (uint16_t)count);
    for (uint32_t i = 0; i < count; i++) le_put32(out + PROTO_SLICES_REF_HDR + 4 * (size_t)i, crc[i]);
    return proto_slices_ref_len(count);
}

size_t proto_slices_ref_copy(uint8_t *out, const proto_slices_ref *r) {
    le_put64(out, r->size);
    le_put16(out + 8, (uint16_t)r->count);
    memcpy(out + PROTO_SLICES_REF_HDR, r->crc, 4 * (size_t)r->count);
    return proto_slices_ref_len(r->count);
}

size_t proto_slices_ref_get(const uint8_t *p, size_t left, uint64_t obj_size, proto_slices_ref *out) {
    if (left < PROTO_SLICES_REF_HDR) return 0;
    out->size = le_get64(p);
    out->count = le_get16(p + 8);
    out->crc = p + PROTO_SLICES_REF_HDR;
    if (!slice_size_ok(out->size) || out->count == 0 || out->count > PROTO_MAX_SLICES ||
        proto_slice_count(obj_size, out->size) != out->count || left < proto_slices_ref_len(out->count))
        return 0;
    return proto_slices_ref_len(out->count);
}

int proto_slices_ref_eq(const proto_slices_ref *a, const proto_slices_ref *b) {
    return a->size == b->size && a->count == b->count && memcmp(a->crc, b->crc, 4 * (size_t)a->count) == 0;
}

void proto_slices_from_ref(const proto_slices_ref *r, proto_slices *out) {
    out->size = r->size;
    out->count = r->count;
    out->crc = unpack(r->crc, r->count);
}
