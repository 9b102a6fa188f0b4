/* server/verify.h - checking a large value's slices on a helper thread
 * while the event loop sends the slices already checked.
 *
 * A GET of a big value used to checksum it whole and only then send it,
 * so the two costs added up. Here one helper thread checks slice after
 * slice (the store's per-slice checksums, store_slices) and publishes how
 * many bytes passed; the loop sends up to that mark and never past it,
 * so a reply costs about the larger of the two. A slice that fails stops
 * its job; the loop then closes the connection instead of sending it. */
#ifndef MKV_VERIFY_H
#define MKV_VERIFY_H

#include <stdint.h>

#include "core/loop.h"
#include "server/store.h"

typedef struct verifier verifier;
typedef struct verify_job verify_job;

/* progress(owner) runs on el's thread whenever a job of owner's got
 * further (or failed). NULL with the reason in err if no thread starts. */
verifier *verifier_create(event_loop *el, void (*progress)(void *owner), char *err, size_t errlen);
/* Waits for the job in hand; releases what finished replies left. NULL is fine. */
void verifier_free(verifier *v);

/* Starts checking the sl->count slices of data[0, len) for owner; NULL
 * when the job cannot be queued (check inline with verify_inline). */
verify_job *verify_start(verifier *v, const void *data, uint64_t len, const store_slices *sl,
                         void *owner);
/* Bytes from the start that passed (len when all did). */
uint64_t verify_ready(const verify_job *j);
/* 1 when a slice failed (its number in *slice): send nothing more. */
int verify_failed(const verify_job *j, uint32_t *slice);
/* The reply is over (written, or its client gone): release(ctx) runs as
 * soon as the helper no longer reads the bytes, now or when the job ends. */
void verify_finish(verify_job *j, void (*release)(void *ctx), void *ctx);

/* The same check on this thread: -1 if all slices pass, else the first
 * that fails. */
int64_t verify_inline(const void *data, uint64_t len, const store_slices *sl);

#endif
