/* gateway/get_stream.h - a large GET's value sent on to its client slice
 * by slice as it arrives from the nodes (internal to src/gateway).
 *
 * A value of GS_MIN bytes or more whose object keeps slice CRCs
 * (proto/slices.h) is not read whole into staging memory: the reply's
 * bulk header goes out at once, then workers read the slices (a few at a
 * time, GS_WINDOW buffers per GET) and each one goes to the socket once
 * its CRC32C matched. A slice that fails its check, or whose node fails,
 * is read from another replica; if none can supply it, the connection is
 * closed: the client sees a cut-off reply, never a wrong byte and never
 * a short value that looks whole. Memory per GET is bounded by the
 * window, whatever the value's size. A read lease that runs out before
 * a slow client took the value is renewed (MOON.GET again, for the very
 * same value: size and slice CRCs), up to GS_RELOCATIONS times. */
#ifndef MKV_GATEWAY_GET_STREAM_H
#define MKV_GATEWAY_GET_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "client/moonkv_internal.h"
#include "gateway/master_async.h"
#include "gateway/workers.h"
#include "server/networking.h"

#define GS_MIN (8ull << 20)            /* values from this size stream (as SETs do: PS_MIN) */
#define GS_WINDOW 3                    /* slice buffers per GET: being read or being sent */
#define GS_MAX_SLICE (16ull << 20)     /* objects cut into larger slices are read whole */

typedef struct get_streamer get_streamer;
typedef struct get_stream get_stream;

/* ma may be NULL (leases then run out instead of being given back or
 * renewed); loop_mc decodes the master's replies. */
get_streamer *get_streamer_create(workers *w, master_async *ma, mkv_client *loop_mc);
/* No lease goes back from now on (the master connection is going). */
void get_streamer_close(get_streamer *sr);
/* Streams still under way keep their own state until they end. */
void get_streamer_free(get_streamer *sr);
/* GETs streamed so far, and of them those cut off (no replica could
 * supply a slice). */
void get_streamer_counts(const get_streamer *sr, uint64_t *streamed, uint64_t *cut);

/* Whether the value located by l (size bytes) goes this way. */
int get_stream_wanted(const mkv_located *l, uint64_t size);

/* Sends l's value (size bytes; l is taken over: its read lease is given
 * back at the end) as a bulk reply into c's slot, which it ends once the
 * value is whole, or, keep_slot (an element of a longer reply), leaves
 * open for the rest. The key is copied. done(ctx) runs once the stream
 * is over: the value whole, or the connection closed, and no worker or
 * socket holds its buffers. */
get_stream *get_stream_start(get_streamer *sr, client *c, reply_slot *slot, int keep_slot, mkv_located *l,
                             uint64_t size, const char *key, size_t keylen, uint64_t epoch,
                             void (*done)(void *ctx), void *ctx);
/* c is gone (and its slot with it): nothing more is sent. May run done. */
void get_stream_client_gone(get_stream *gs);

#endif
