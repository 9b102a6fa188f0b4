/* tests/unit/test_jobqueue.c - jobs run once each, in order on one
 * thread; stop leaves queued jobs to cancel; the bound refuses; the
 * finished list and wait_idle; many producers at once. */
#include "core/jobqueue.h"
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#define NJOBS 2000

typedef struct tjob {
    jq_job q;
    int id;
    atomic_int ran;
} tjob;

typedef struct log_state {
    pthread_mutex_t mu;
    int order[NJOBS];
    int n;
    atomic_int gate;          /* jobs wait while 0 */
    atomic_int started;
    atomic_int finished_calls;
} log_state;

static void log_run(jq_job *j, void *arg) {
    log_state *s = arg;
    tjob *t = (tjob *)j;
    atomic_fetch_add(&s->started, 1);
    while (!atomic_load(&s->gate)) usleep(100);
    atomic_fetch_add(&t->ran, 1);
    pthread_mutex_lock(&s->mu);
    if (s->n < NJOBS) s->order[s->n++] = t->id;
    pthread_mutex_unlock(&s->mu);
}

static void on_finished(void *arg) { atomic_fetch_add(&((log_state *)arg)->finished_calls, 1); }

static void init_state(log_state *s, int gate) {
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    atomic_store(&s->gate, gate);
}

static tjob jobs[NJOBS];

static void *open_gate_later(void *arg) {
    usleep(20000);
    atomic_store(&((log_state *)arg)->gate, 1);
    return NULL;
}

static void reset_jobs(void) {
    for (int i = 0; i < NJOBS; i++) {
        jobs[i].q.run = log_run;
        jobs[i].id = i;
        atomic_store(&jobs[i].ran, 0);
    }
}

/* Every case's start: s fresh with its gate (jobs wait while 0), the jobs
 * reset, and a queue of nthreads running them. */
static jobqueue *start(log_state *s, int gate, int nthreads, size_t max_pending, int keep_finished) {
    init_state(s, gate);
    reset_jobs();
    void *args[JOBQUEUE_MAX_THREADS];
    for (int i = 0; i < JOBQUEUE_MAX_THREADS; i++) args[i] = s;
    char err[128];
    jobqueue_config cfg = {.nthreads = nthreads, .thread_arg = args, .max_pending = max_pending,
                           .finished = keep_finished ? on_finished : NULL, .finished_arg = s};
    return jobqueue_start(&cfg, err, sizeof err);
}

static void test_one_thread_keeps_order(void) {
    log_state s;
    jobqueue *q = start(&s, 1, 1, 0, 0);
    ASSERT(q != NULL);
    for (int i = 0; i < 500; i++) ASSERT_EQ(jobqueue_submit(q, &jobs[i].q), 0);
    jobqueue_wait_idle(q);
    ASSERT_EQ(s.n, 500);
    for (int i = 0; i < 500; i++) ASSERT_EQ(s.order[i], i);
    jobqueue_stop(q);
    ASSERT(jobqueue_cancel(q) == NULL);
    jobqueue_free(q);
}

/* One job holds the only thread; stop waits for it and leaves the rest
 * queued, which cancel hands back oldest first, never run. */
static void test_stop_leaves_pending(void) {
    log_state s;
    jobqueue *q = start(&s, 0, 1, 0, 0);
    ASSERT(q != NULL);
    for (int i = 0; i < 10; i++) jobqueue_submit(q, &jobs[i].q);
    while (atomic_load(&s.started) == 0) usleep(100);
    pthread_t opener;
    pthread_create(&opener, NULL, open_gate_later, &s);
    jobqueue_stop(q);   /* returns once job 0 is through the gate */
    pthread_join(opener, NULL);
    ASSERT_EQ(atomic_load(&jobs[0].ran), 1);
    ASSERT_EQ(s.n, 1);
    int n = 0, expect = 1;
    for (jq_job *j = jobqueue_cancel(q); j; j = j->next, n++) {
        tjob *t = (tjob *)j;
        ASSERT_EQ(t->id, expect++);
        ASSERT_EQ(atomic_load(&t->ran), 0);
    }
    ASSERT_EQ(n + s.n, 10);
    /* After stop a submit queues but runs nothing. */
    ASSERT_EQ(jobqueue_submit(q, &jobs[20].q), 0);
    usleep(2000);
    ASSERT_EQ(atomic_load(&jobs[20].ran), 0);
    ASSERT(jobqueue_cancel(q) == &jobs[20].q);
    jobqueue_free(q);
}

/* Cancel while threads run: what it returns never runs, the rest ran
 * exactly once. */
static void test_cancel_while_running(void) {
    log_state s;
    jobqueue *q = start(&s, 0, 3, 0, 0);
    ASSERT(q != NULL);
    for (int i = 0; i < 100; i++) jobqueue_submit(q, &jobs[i].q);
    while (atomic_load(&s.started) < 3) usleep(100);
    int cancelled = 0;
    for (jq_job *j = jobqueue_cancel(q); j; j = j->next) {
        cancelled++;
        j->run = NULL;   /* would crash if the queue still ran it */
    }
    ASSERT_EQ(cancelled, 97);
    atomic_store(&s.gate, 1);
    jobqueue_wait_idle(q);
    ASSERT_EQ(s.n, 3);
    for (int i = 0; i < 100; i++) ASSERT(atomic_load(&jobs[i].ran) == (jobs[i].q.run != NULL));
    jobqueue_stop(q);
    jobqueue_free(q);
}

static void test_bound_refuses(void) {
    log_state s;
    jobqueue *q = start(&s, 0, 1, 4, 0);
    ASSERT(q != NULL);
    jobqueue_submit(q, &jobs[0].q);
    while (atomic_load(&s.started) == 0) usleep(100);   /* taken: no longer pending */
    for (int i = 1; i <= 4; i++) ASSERT_EQ(jobqueue_submit(q, &jobs[i].q), 0);
    ASSERT_EQ(jobqueue_submit(q, &jobs[5].q), -1);
    atomic_store(&s.gate, 1);
    jobqueue_wait_idle(q);
    ASSERT_EQ(s.n, 5);
    ASSERT_EQ(atomic_load(&jobs[5].ran), 0);
    jobqueue_stop(q);
    jobqueue_free(q);
}

static void test_finished_list(void) {
    log_state s;
    jobqueue *q = start(&s, 1, 1, 0, 1);
    ASSERT(q != NULL);
    for (int i = 0; i < 50; i++) jobqueue_submit(q, &jobs[i].q);
    jobqueue_wait_idle(q);
    ASSERT_EQ(atomic_load(&s.finished_calls), 50);
    int n = 0;
    for (jq_job *j = jobqueue_take_finished(q); j; j = j->next) ASSERT_EQ(((tjob *)j)->id, n++);
    ASSERT_EQ(n, 50);
    ASSERT(jobqueue_take_finished(q) == NULL);
    jobqueue_stop(q);
    jobqueue_free(q);
}

typedef struct producer {
    jobqueue *q;
    int first, count;
} producer;

static void *produce(void *arg) {
    producer *p = arg;
    for (int i = p->first; i < p->first + p->count; i++) jobqueue_submit(p->q, &jobs[i].q);
    return NULL;
}

static void test_many_producers(void) {
    log_state s;
    jobqueue *q = start(&s, 1, 4, 0, 0);
    ASSERT(q != NULL);
    enum { NPROD = 8 };
    pthread_t th[NPROD];
    producer p[NPROD];
    for (int i = 0; i < NPROD; i++) {
        p[i] = (producer){q, i * (NJOBS / NPROD), NJOBS / NPROD};
        pthread_create(&th[i], NULL, produce, &p[i]);
    }
    for (int i = 0; i < NPROD; i++) pthread_join(th[i], NULL);
    jobqueue_wait_idle(q);
    ASSERT_EQ(s.n, NJOBS);
    for (int i = 0; i < NJOBS; i++) ASSERT_EQ(atomic_load(&jobs[i].ran), 1);
    ASSERT_EQ(jobqueue_threads(q), 4);
    jobqueue_stop(q);
    jobqueue_free(q);
}

static void test_bad_thread_count(void) {
    char err[128] = "";
    jobqueue_config cfg = {.nthreads = JOBQUEUE_MAX_THREADS + 1};
    ASSERT(jobqueue_start(&cfg, err, sizeof err) == NULL);
    ASSERT_STREQ(err, "thread count must be 1 to 8");
    cfg.nthreads = 0;
    ASSERT(jobqueue_start(&cfg, err, sizeof err) == NULL);
}

int main(void) {
    RUN_TEST(test_one_thread_keeps_order);
    RUN_TEST(test_stop_leaves_pending);
    RUN_TEST(test_cancel_while_running);
    RUN_TEST(test_bound_refuses);
    RUN_TEST(test_finished_list);
    RUN_TEST(test_many_producers);
    RUN_TEST(test_bad_thread_count);
    TEST_EXIT();
}
