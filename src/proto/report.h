/* proto/report.h - the packed form of MOON.REPORT (PROTOCOL.md).
 *
 * After a master restart every node reports each extent it holds. The
 * text form spends seven decimal arguments per extent; the packed form
 * carries a batch as one bulk string of fixed-layout little-endian
 * records, each followed by its key:
 *
 *   u16 keylen | u8 want | u8 flags (0) | u32 crc | u64 size |
 *   u64 obj_off | u64 seg_off | u64 length | key[keylen]
 *
 * The decoder is the only reader of a peer's bytes here: it bounds every
 * field and never reads past the blob. */
#ifndef MKV_PROTO_REPORT_H
#define MKV_PROTO_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/limits.h"

#define PROTO_REPORT_HDR      40          /* bytes of a record before its key */
#define PROTO_REPORT_MAX_BLOB (32 << 20)  /* bytes of one packed MOON.REPORT */

/* One extent: bytes [obj_off, obj_off+length) of key's object, at seg_off. */
typedef struct proto_report_rec {
    const char *key;
    size_t keylen;
    uint64_t size;
    uint32_t crc, want;
    uint64_t obj_off, seg_off, length;
} proto_report_rec;

static inline size_t proto_report_len(size_t keylen) { return PROTO_REPORT_HDR + keylen; }

/* Writes r at out (room for proto_report_len(r->keylen)); returns the bytes. */
size_t proto_report_put(uint8_t *out, const proto_report_rec *r);

/* Decodes the record at *p (before end): 0 with *p past it and r's key
 * pointing into the blob, or -1 if it is cut off or a field is out of
 * bounds (keylen 1..PROTO_MAX_KEY_LEN, want <= PROTO_MAX_REPLICAS, sizes
 * and offsets <= PROTO_MAX_SEGMENT, flags 0). */
int proto_report_next(const uint8_t **p, const uint8_t *end, proto_report_rec *r);

#endif
