/* proto/notes.h - the packed reply of MOON.HOLDINGS id ack PACKED.
 *
 * The array reply spends a RESP element per field (a dozen per note),
 * each a reply object for the node's hiredis reader, and most of a
 * node's time under a stream of small puts went to them. The packed form
 * is one bulk string of records, one per note, in order (little-endian):
 *
 *   hold: u8 0 | u8 want | u16 keylen | u32 crc | u64 size | u16 nextents |
 *         key[keylen] | nextents x (u32 node | u64 offset | u64 length)
 *   drop: u8 1 | u8 0 | u16 keylen | key[keylen]
 *   drop of the disk tier's record (docs/SSD_TIER.md): the same, u8 1 second
 *   hold with slice CRCs: a hold with u8 2 first, then after its extents
 *         u64 slice_size | u16 count | count x u32 crc (proto/slices.h)
 *
 * Holds with slice CRCs go only to nodes that ask for them (MOON.HOLDINGS
 * ... PACKED SLICES); proto_notes_plain makes a blob for the others.
 *
 * The decoder is the only reader of a peer's bytes here: it bounds every
 * field (as the array form's reader does) and never reads past the blob. */
#ifndef MKV_PROTO_NOTES_H
#define MKV_PROTO_NOTES_H

#include <stddef.h>
#include <stdint.h>

#include "core/objtable.h"
#include "proto/limits.h"
#include "proto/slices.h"
#include "resp/resp_writer.h"

#define PROTO_NOTE_HOLD_HDR 18   /* bytes of a hold before its key */
#define PROTO_NOTE_DROP_HDR 4
#define PROTO_NOTE_EXTENT   20
/* The master stops adding notes to a reply once it holds this many
 * bytes; a reply that long (or of MASTER_MAX_HOLDINGS notes) means more
 * wait. A single note may take it past this, never past 4096 notes'
 * worth (the bound a reader may apply). */
#define PROTO_NOTES_BLOB    (1 << 20)

/* One note, decoded: key points into the blob, extents into the caller's room. */
#define PROTO_NOTE_DROP_DISK 2   /* proto_note_put's drop: the disk record, not the segment's */

typedef struct proto_note {
    int drop;                    /* 1, or PROTO_NOTE_DROP_DISK */
    const char *key;
    size_t keylen;
    uint64_t size;
    uint32_t crc, want;
    obj_replica rep;             /* every extent of the replica, any node */
    proto_slices_ref slices;     /* into the blob; count 0: none */
} proto_note;

/* Appends a hold of key (replica rep of an object of size bytes, crc,
 * want replicas, slice CRCs sl: NULL or count 0 for none) or, with drop
 * set, a drop (the rest ignored; PROTO_NOTE_DROP_DISK: of its disk record). */
void proto_note_put(resp_buf *b, int drop, const void *key, size_t keylen, uint64_t size, uint32_t crc,
                    uint32_t want, const obj_replica *rep, const proto_slices *sl);

/* The len bytes of whole records at recs (this process's) appended to
 * out without slice CRCs, for a node that did not ask for them. */
void proto_notes_plain(const uint8_t *recs, size_t len, resp_buf *out);

/* The length of a record known to be whole and in bounds (one this
 * process wrote with proto_note_put): never for a peer's bytes. */
size_t proto_note_len(const uint8_t *rec);

/* Decodes the record at *p (before end), its extents into ext (room for
 * PROTO_MAX_EXTENTS): 0 with *p past it, or -1 if it is cut off or breaks
 * a bound (kind 0, 1 or 2, a kind 2's slice CRCs as proto_slices_ref_get
 * takes them, keylen 1..PROTO_MAX_KEY_LEN, want <=
 * PROTO_MAX_REPLICAS, size 1..PROTO_MAX_SEGMENT, 1..PROTO_MAX_EXTENTS
 * extents each on a node >= 1 with offset <= PROTO_MAX_SEGMENT and
 * length 1..PROTO_MAX_SEGMENT, a drop's second byte 0). */
int proto_note_next(const uint8_t **p, const uint8_t *end, obj_extent *ext, proto_note *out);

#endif
