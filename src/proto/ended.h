/* proto/ended.h - the packed reply of MOON.MPUTEND PACKED.
 *
 * The array reply is an element per key, +OK or an error: a reply
 * object each for a hiredis reader, for what is almost always "OK". The
 * packed form is one bulk string holding a record per key, in order:
 *
 *   u8 0                             published
 *   u8 1 | u16 len | the error text  refused (placed.h's refusal record)
 *
 * The decoder never reads past the blob. */
#ifndef MKV_PROTO_ENDED_H
#define MKV_PROTO_ENDED_H

#include <stddef.h>
#include <stdint.h>

#include "resp/resp_writer.h"

/* One key's record, decoded: err NULL when published, else the
 * refusal's text ("WORD message", into the blob). */
typedef struct proto_ended {
    const char *err;
    size_t errlen;
} proto_ended;

void proto_ended_put_ok(resp_buf *b);
/* A refusal (text as an error reply's, without the '-'). */
void proto_ended_put_error(resp_buf *b, const char *text);

/* Decodes the record at *p (before end): 0 with *p past it, or -1 if it
 * is cut off or not a record. */
int proto_ended_next(const uint8_t **p, const uint8_t *end, proto_ended *out);

#endif
