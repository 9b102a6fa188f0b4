/* core/jobqueue.h - a FIFO of jobs run by a few threads.
 *
 * The one thread pool of the project: the workpool's split copies, the
 * node's copy tasks and the gateway's client calls all run on it. A job
 * is a jq_job embedded in the caller's struct (no allocation per job);
 * the thread that takes it calls job->run(job, arg), arg being that
 * thread's entry of the start-time array (e.g. its own client).
 *
 * Life: start -> submit... -> stop (no new job starts, the running ones
 * finish, the threads are joined) -> cancel (take back the jobs that
 * never ran) -> free. Cancel and wait_idle also work while running. */
#ifndef MKV_JOBQUEUE_H
#define MKV_JOBQUEUE_H

#include <stddef.h>

#define JOBQUEUE_MAX_THREADS 8

typedef struct jq_job jq_job;
struct jq_job {
    void (*run)(jq_job *j, void *thread_arg);
    jq_job *next;   /* the queue's */
};

typedef struct jobqueue_config {
    int nthreads;              /* 1..JOBQUEUE_MAX_THREADS */
    void *const *thread_arg;   /* thread i passes thread_arg[i]; NULL: NULL */
    size_t max_pending;        /* submit refuses beyond this; 0: no bound */
    /* Non-NULL: a job that ran goes on the finished list (take it with
     * jobqueue_take_finished) and this is called on the worker thread to
     * wake whoever takes it. NULL: the queue forgets a job once it ran. */
    void (*finished)(void *arg);
    void *finished_arg;
} jobqueue_config;

typedef struct jobqueue jobqueue;

/* NULL with the reason in err when the config is bad or a thread cannot
 * be started (the ones started are stopped again). */
jobqueue *jobqueue_start(const jobqueue_config *cfg, char *err, size_t errlen);
/* 0, or -1 when max_pending jobs wait already (j is not queued). After
 * stop, jobs are queued but never run: cancel gives them back. */
int jobqueue_submit(jobqueue *q, jq_job *j);
/* The jobs not yet taken by a thread, oldest first, as a list linked by
 * next; the queue forgets them. NULL when none. */
jq_job *jobqueue_cancel(jobqueue *q);
/* The finished list (see finished in the config), oldest first. */
jq_job *jobqueue_take_finished(jobqueue *q);
/* Returns when no job is queued or running. */
void jobqueue_wait_idle(jobqueue *q);
int jobqueue_threads(const jobqueue *q);
/* Running jobs finish, queued ones stay queued; the threads are joined. */
void jobqueue_stop(jobqueue *q);
/* After stop; jobs still queued or finished are the caller's. NULL is fine. */
void jobqueue_free(jobqueue *q);

#endif
