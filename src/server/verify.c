/* server/verify.c - see verify.h.
 *
 * Jobs run on a jobqueue of one thread, in order. A job publishes its
 * verified mark and wakes the loop after every slice; the loop side owns
 * everything else (the list of jobs, their owners, the deferred release),
 * so the helper touches only the bytes, the checksums and two atomics. */
#include "server/verify.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "core/crc32c.h"
#include "core/jobqueue.h"
#include "core/util.h"

#define VERIFY_MAX_QUEUED 4096   /* beyond this, replies check inline */

struct verify_job {
    jq_job q;                      /* first: the queue hands this back */
    loop_wake *wake;
    const uint8_t *data;
    uint64_t len;
    store_slices sl;
    atomic_uint_least64_t ready;   /* bytes that passed */
    atomic_uint failed;            /* 0, or 1 + the slice that failed */
    atomic_int cancel;             /* the reply is gone: stop early */
    /* Loop thread only. */
    void *owner;                   /* NULL once verify_finish ran */
    void (*release)(void *ctx);    /* deferred by verify_finish */
    void *ctx;
    verifier *v;
    int ended;                     /* back from the helper */
    verify_job *prev, *next;       /* the verifier's jobs */
};

struct verifier {
    jobqueue *q;
    loop_wake *wake;
    void (*progress)(void *owner);
    verify_job *jobs;
};

static uint64_t slice_bytes(const store_slices *sl, uint64_t len, uint32_t i) {
    uint64_t off = (uint64_t)i * sl->slice_len;
    return len - off < sl->slice_len ? len - off : sl->slice_len;
}

int64_t verify_inline(const void *data, uint64_t len, const store_slices *sl) {
    const uint8_t *p = data;
    for (uint32_t i = 0; i < sl->count; i++) {
        uint64_t off = (uint64_t)i * sl->slice_len;
        if (crc32c(0, p + off, slice_bytes(sl, len, i)) != sl->crc[i]) return i;
    }
    return -1;
}

/* On the helper: slice after slice, each published as it passes. */
static void job_run(jq_job *q, void *unused) {
    verify_job *j = (verify_job *)q;
    for (uint32_t i = 0; i < j->sl.count && !atomic_load(&j->cancel); i++) {
        uint64_t off = (uint64_t)i * j->sl.slice_len, n = slice_bytes(&j->sl, j->len, i);
        if (crc32c(0, j->data + off, n) != j->sl.crc[i]) {
            atomic_store(&j->failed, i + 1);
            loop_wake_send(j->wake);
            return;
        }
        atomic_store(&j->ready, off + n);
        loop_wake_send(j->wake);
    }
}

static void job_free(verifier *v, verify_job *j) {
    if (j->prev) j->prev->next = j->next;
    else v->jobs = j->next;
    if (j->next) j->next->prev = j->prev;
    if (j->release) j->release(j->ctx);
    free(j);
}

/* Back from the helper: a job whose reply is over goes. */
static void job_ended(verifier *v, verify_job *j) {
    j->ended = 1;
    if (!j->owner) job_free(v, j);
}

static void wake_cb(event_loop *el, void *data) {
    verifier *v = data;
    for (jq_job *q = jobqueue_take_finished(v->q), *next; q; q = next) {
        next = q->next;
        job_ended(v, (verify_job *)q);
    }
    for (verify_job *j = v->jobs; j; j = j->next)
        if (j->owner) v->progress(j->owner);
}

static void finished_cb(void *arg) { loop_wake_send(arg); }

verifier *verifier_create(event_loop *el, void (*progress)(void *owner), char *err, size_t errlen) {
    verifier *v = xcalloc(1, sizeof *v);
    v->progress = progress;
    v->wake = loop_wake_create(el, wake_cb, v);
    jobqueue_config cfg = {.nthreads = 1, .max_pending = VERIFY_MAX_QUEUED,
                           .finished = finished_cb, .finished_arg = v->wake};
    if (!(v->q = jobqueue_start(&cfg, err, errlen))) {
        loop_wake_free(v->wake);
        free(v);
        return NULL;
    }
    return v;
}

void verifier_free(verifier *v) {
    if (!v) return;
    for (verify_job *j = v->jobs; j; j = j->next) atomic_store(&j->cancel, 1);
    jobqueue_stop(v->q);
    for (jq_job *q = jobqueue_cancel(v->q), *next; q; q = next) {
        next = q->next;
        ((verify_job *)q)->ended = 1;
    }
    for (jq_job *q = jobqueue_take_finished(v->q), *next; q; q = next) {
        next = q->next;
        ((verify_job *)q)->ended = 1;
    }
    while (v->jobs) job_free(v, v->jobs);
    jobqueue_free(v->q);
    loop_wake_free(v->wake);
    free(v);
}

verify_job *verify_start(verifier *v, const void *data, uint64_t len, const store_slices *sl,
                         void *owner) {
    verify_job *j = xcalloc(1, sizeof *j);
    j->q.run = job_run;
    j->wake = v->wake;
    j->v = v;
    j->data = data;
    j->len = len;
    j->sl = *sl;
    j->owner = owner;
    if (jobqueue_submit(v->q, &j->q) != 0) {
        free(j);
        return NULL;
    }
    j->next = v->jobs;
    if (v->jobs) v->jobs->prev = j;
    v->jobs = j;
    return j;
}

uint64_t verify_ready(const verify_job *j) { return atomic_load(&((verify_job *)j)->ready); }

int verify_failed(const verify_job *j, uint32_t *slice) {
    unsigned f = atomic_load(&((verify_job *)j)->failed);
    if (f) *slice = f - 1;
    return f != 0;
}

void verify_finish(verify_job *j, void (*release)(void *ctx), void *ctx) {
    j->owner = NULL;
    j->release = release;
    j->ctx = ctx;
    atomic_store(&j->cancel, 1);
    if (j->ended) job_free(j->v, j);
}
