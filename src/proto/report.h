/* proto/report.h - the packed form of MOON.REPORT (docs/PROTOCOL.md).
 *
 * After a master restart every node reports each extent it holds. The
 * text form spends seven decimal arguments per extent; the packed form
 * carries a batch as one bulk string of fixed-layout little-endian
 * records, each followed by its key:
 *
 *   u16 keylen | u8 want | u8 flags | u32 crc | u64 size |
 *   u64 obj_off | u64 seg_off | u64 length | key[keylen] |
 *   with flags 1: u64 slice_size | u16 count | count x u32 crc
 *
 * Flags 1 carries the object's slice CRCs as the node's index has them
 * (a node sends them with the first extent of each object it reports);
 * flags 0 is the record of before, without. Flags 2 (with or without 1):
 * a record of the node's disk tier, not segment bytes (docs/SSD_TIER.md):
 * the object whole (obj_off 0, length size), or one piece of a node's
 * share of an object striped over nodes (obj_off and length where it
 * lies in the object; a share written before pieces were kept: obj_off
 * 0 and the share's length); seg_off is 0 on the wire, decoded
 * PROTO_REPORT_ON_DISK.
 * The decoder is the only reader of a peer's bytes here: it bounds every
 * field and never reads past the blob. */
#ifndef MKV_PROTO_REPORT_H
#define MKV_PROTO_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "proto/limits.h"
#include "proto/slices.h"

#define PROTO_REPORT_HDR      40          /* bytes of a record before its key */
#define PROTO_REPORT_MAX_BLOB (32 << 20)  /* bytes of one packed MOON.REPORT */
#define PROTO_REPORT_SLICES   1u          /* flags: slice CRCs follow the key */
#define PROTO_REPORT_DISK     2u          /* flags: a disk record (the object whole, or a share's piece) */
#define PROTO_REPORT_ON_DISK  UINT64_MAX  /* seg_off of a disk record's report */

/* One extent: bytes [obj_off, obj_off+length) of key's object, at seg_off
 * (PROTO_REPORT_ON_DISK: in a record of the node's disk tier: the object
 * whole, or a piece of the node's share of it). */
typedef struct proto_report_rec {
    const char *key;
    size_t keylen;
    uint64_t size;
    uint32_t crc, want;
    uint64_t obj_off, seg_off, length;
    proto_slices_ref slices;   /* count 0: none */
} proto_report_rec;

static inline size_t proto_report_len(const proto_report_rec *r) {
    return PROTO_REPORT_HDR + r->keylen + (r->slices.count ? proto_slices_ref_len(r->slices.count) : 0);
}

/* Writes r at out (room for proto_report_len(r)); returns the bytes. */
size_t proto_report_put(uint8_t *out, const proto_report_rec *r);

/* Decodes the record at *p (before end): 0 with *p past it and r's key
 * pointing into the blob, or -1 if it is cut off or a field is out of
 * bounds (keylen 1..PROTO_MAX_KEY_LEN, want <= PROTO_MAX_REPLICAS, sizes
 * and offsets <= PROTO_MAX_SEGMENT, flags 0..3, the slice CRCs of flags 1
 * as proto_slices_ref_get takes them, a disk record's seg_off 0 and
 * obj_off + length at most its size). */
int proto_report_next(const uint8_t **p, const uint8_t *end, proto_report_rec *r);

#endif
