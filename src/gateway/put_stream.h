/* gateway/put_stream.h - a large SET's value moved on to the nodes while
 * it still arrives (internal to src/gateway).
 *
 * At the value's bulk header the gateway asks the master for placement
 * (MOON.PUTSTART over the asynchronous connection) and maps address
 * space for the whole value without backing it (staging_get_sparse).
 * As networking reports bytes landed, each whole slice goes to a worker
 * that writes it to every replica and checksums it, then gives its pages
 * back (MADV_DONTNEED). Networking may write only PS_WINDOW bytes past
 * the slices written, so a SET in flight holds a few slices of memory,
 * not its value. When the command is whole the last slice goes, and once
 * every slice is written MOON.PUTEND publishes the value with the CRC32C
 * combined from the slices'.
 *
 * A stream the master did not place (EXISTS, NOSPACE, no answer) drops
 * nothing: the whole value stays, and when the command runs the put goes
 * the ordinary way (put_batch.c), with the ordinary replies (an
 * idempotent SET of the same bytes answers OK). A slice that fails once
 * other slices' bytes are gone fails the put (revoked at once; the reply
 * says why). A stream whose client leaves is revoked at once. */
#ifndef MKV_GATEWAY_PUT_STREAM_H
#define MKV_GATEWAY_PUT_STREAM_H

#include <stdint.h>

#include "client/moonkv.h"
#include "proto/slices.h"
#include "core/loop.h"
#include "gateway/master_async.h"
#include "gateway/put_batch.h"
#include "gateway/cluster_call.h"

/* A streamed SET writes its value a slice (PROTO_SLICE_WRITE) at a time,
 * and the slices' CRCs go to the master as the value's slice CRCs. */
#define PS_WINDOW (4 * PROTO_SLICE_WRITE)   /* bytes a stream may hold ahead of the nodes */
#define PS_MIN (2 * PROTO_SLICE_WRITE)      /* smaller values go whole (put_batch.c) */

typedef struct put_streamer put_streamer;
typedef struct put_stream put_stream;

put_streamer *put_streamer_create(put_batcher *puts, master_async *ma, workers *w, staging *pool,
                                  mkv_client *loop_mc, int replicas);
/* Streams waiting for their last bytes to be written finish unshipped
 * (their writes' done run); the workers must be gone already. */
void put_streamer_close(put_streamer *sr);
void put_streamer_free(put_streamer *sr);

/* Starts streaming p (p->buf from staging_get_sparse, p->key set):
 * p->stream is set. resume(ctx) runs when the window moves on while the
 * value is not whole yet. */
void put_stream_start(put_streamer *sr, store_put *p, void (*resume)(void *ctx), void *ctx);
/* landed bytes of the value are in; how far it may be written now. */
uint64_t put_stream_progress(put_stream *st, uint64_t landed);
/* The whole value is in. 1: the stream publishes it and w->done runs
 * when it did (the outcome in w->put, whose stream is gone then); 0: it
 * was never placed, nothing moved, p->stream is gone: put it the
 * ordinary way. */
int put_stream_finish(put_stream *st, gw_write *w);
/* The put is abandoned (its client left): revoked now; the stream takes
 * the put's buffer and frees it once no worker reads it. */
void put_stream_abort(put_stream *st);

#endif
