/* proto/placed.h - the packed reply of MOON.MPUTSTART ... PACKED.
 *
 * The array reply nests per key an array per replica of extent arrays:
 * about a dozen RESP elements per key, each a reply object for a hiredis
 * reader. The packed form is one bulk string holding a record per key,
 * in order (little-endian):
 *
 *   u8 0 | u8 nreplicas | per replica: u16 nextents | nextents x cap
 *   u8 1 | u16 len | the error's text ("WORD message")
 *
 * A cap's 64 bytes (backend/cap.h) already name the extent's node,
 * offset and length, so an extent is its cap. The decoder bounds every
 * count and never reads past the blob; it checks what the array form's
 * decoder checks (proto/extents.h). It allocates nothing per record: the
 * extents go to the caller's proto_extbuf, reused from record to record
 * (a gateway decodes a record per small SET and GET). */
#ifndef MKV_PROTO_PLACED_H
#define MKV_PROTO_PLACED_H

#include <stddef.h>
#include <stdint.h>

#include "backend/engine.h"
#include "proto/extents.h"
#include "resp/resp_writer.h"

/* Where records' extents are decoded to: the caller's, kept across
 * records and grown to the largest one seen (bounded by the blob: each
 * extent is 64 bytes of it), so a warm decoder allocates nothing. */
typedef struct proto_extbuf {
    te_extent *ext;
    size_t cap;
} proto_extbuf;

void proto_extbuf_free(proto_extbuf *b);
/* Room for n extents in b, its earlier ones gone (n is bounded by what
 * the counts came from: a blob, or a reply's elements). */
te_extent *proto_extbuf_room(proto_extbuf *b, size_t n);

/* One key's record, decoded. */
typedef struct proto_placed {
    const char *err;            /* a refusal's text (into the blob), or NULL */
    size_t errlen;
    uint32_t nreplicas;         /* else: its replicas, their extents in the */
    uint32_t nextents;          /* caller's buffer (valid until its next decode), */
    te_extent *ext[PROTO_MAX_REPLICAS];   /* nextents over all of them */
    uint32_t next[PROTO_MAX_REPLICAS];
} proto_placed;

/* Appends o's placement, caps signed under g (write grants). */
void proto_placed_put(resp_buf *b, const object *o, const proto_grant *g);
/* Appends a refusal (text as an error reply's, without the '-'). */
void proto_placed_put_error(resp_buf *b, const char *text);

/* Decodes the record at *p (before end) of an object of size bytes,
 * every cap granting `rights`, its extents into buf: 0 with *p past it,
 * or -1 if it is cut off or breaks a bound. buf NULL: refusals only (a
 * placement is -1). Nothing to free but buf, once. */
int proto_placed_next(const uint8_t **p, const uint8_t *end, uint64_t size, uint32_t rights,
                      proto_extbuf *buf, proto_placed *out);

/* A record's replica part alone (u8 nreplicas, then per replica its
 * extent count and caps), which MOON.MGETPACKED's records share
 * (proto/located.h). _next fills out's nreplicas, nextents, ext and
 * next from a zeroed out, as proto_placed_next: 0 with *p past it, or
 * -1. */
void proto_replicas_put(resp_buf *b, const object *o, const proto_grant *g);
int proto_replicas_next(const uint8_t **p, const uint8_t *end, uint64_t size, uint32_t rights,
                        proto_extbuf *buf, proto_placed *out);

#endif
