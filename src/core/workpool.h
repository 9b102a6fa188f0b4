/* core/workpool.h - a few helper threads for splitting one large job.
 *
 * workpool_run(wp, n, fn, arg) calls fn(arg, i) for every i in [0, n):
 * the caller runs i = 0 itself, the helpers the rest, and it returns when
 * all n are done. For memory-bound work (copies, checksums) of buffers
 * too big for one core's bandwidth. One caller at a time per pool. The
 * helpers are a jobqueue (core/jobqueue.h) fed with one runner job per
 * helper, kept in the pool: a run allocates nothing. */
#ifndef MKV_WORKPOOL_H
#define MKV_WORKPOOL_H

#include "core/jobqueue.h"

#define WORKPOOL_MAX_THREADS JOBQUEUE_MAX_THREADS

typedef struct workpool workpool;
typedef void workpool_fn(void *arg, int i);

/* nthreads helpers (clamped to 1..WORKPOOL_MAX_THREADS), started now. */
workpool *workpool_start(int nthreads);
/* n may exceed the width: each part goes to whoever is free next. NULL wp
 * (or no helper) runs everything in the caller. */
void workpool_run(workpool *wp, int n, workpool_fn *fn, void *arg);
int workpool_width(const workpool *wp);   /* 1 + helpers; 1 for NULL */
/* Helpers worth starting for memory-bound work: one fewer than the online
 * cores, within 1..max. */
int workpool_helpers_for_cores(int max);
void workpool_stop(workpool *wp);         /* NULL is fine */

#endif
