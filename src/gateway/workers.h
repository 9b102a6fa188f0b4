/* gateway/workers.h - a few threads that move the batches' bytes (and
 * make the blocking libmoonkv calls of a batch's fallback) for the loop.
 *
 * Every worker calls the process's one mkv_client (a client is shared by
 * threads: one master connection, one transfer engine), the loop's too.
 * The loop submits jobs; any idle worker runs one (job->run, on the
 * worker, with the client) and hands it back; the loop then calls
 * job->done, woken by a loop wake. Jobs still queued at destroy are not
 * run: done is called with job->cancelled set, so every job is finished
 * exactly once. */
#ifndef MKV_GATEWAY_WORKERS_H
#define MKV_GATEWAY_WORKERS_H

#include <stddef.h>
#include <stdint.h>

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

/* n threads running jobs with mc (which outlives them). NULL with a
 * message in err. */
workers *workers_create(event_loop *loop, int n, mkv_client *mc, char *err, size_t errlen);
void workers_submit(workers *w, gw_job *j);
/* Jobs submitted and not yet done; jobs finished since the start. */
size_t workers_inflight(const workers *w);
unsigned long long workers_done(const workers *w);
/* The loop's master connection epoch (master_async_epoch) whose node
 * table the client last learnt for these workers' jobs (any thread:
 * cluster_worker_topology). */
uint64_t *workers_learnt(workers *w);
/* Waits for the running jobs, cancels the queued ones, finishes all. */
void workers_destroy(workers *w);

#endif
