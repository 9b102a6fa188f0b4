/* gateway/workers.h - a few threads that move the batches' bytes (and
 * make the blocking libmoonkv calls of a batch's fallback) for the loop.
 *
 * Each worker owns an mkv_client (a client is not thread-safe). The loop
 * submits jobs; any idle worker runs one (job->run, on the worker, with
 * its client) and hands it back; the loop then calls job->done, woken by
 * a loop wake. Jobs still queued at destroy are not run: done is called
 * with job->cancelled set, so every job is finished exactly once. */
#ifndef MKV_GATEWAY_WORKERS_H
#define MKV_GATEWAY_WORKERS_H

#include <stddef.h>

#include "client/moonkv.h"
#include "core/jobqueue.h"
#include "core/loop.h"

typedef struct gw_job gw_job;
struct gw_job {
    jq_job q;   /* first: the queue's link */
    void (*run)(gw_job *j, mkv_client *mc);
    void (*done)(gw_job *j);
    int cancelled;
};

typedef struct workers workers;

/* n threads, each with a client connected with opt and set up by
 * setup(mc, ctx) (e.g. registering memory; MKV_OK or an error). NULL
 * with a message in err. */
workers *workers_create(event_loop *loop, int n, const mkv_options *opt,
                        int (*setup)(mkv_client *mc, void *ctx),
                        void (*teardown)(mkv_client *mc, void *ctx), void *ctx, char *err,
                        size_t errlen);
void workers_submit(workers *w, gw_job *j);
/* Jobs submitted and not yet done; jobs finished since the start. */
size_t workers_inflight(const workers *w);
unsigned long long workers_done(const workers *w);
/* The workers' clients' transfer counters added to *sum (any thread). */
void workers_add_transfer_stats(const workers *w, mkv_transfer_stats *sum);
/* Waits for the running jobs, cancels the queued ones, finishes all. */
void workers_destroy(workers *w);

#endif
