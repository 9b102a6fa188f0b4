/* node/scrub.c - see scrub.h. */
#include "node/scrub.h"

#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/cond.h"
#include "core/util.h"

#define SCRUB_TICK_MS 100   /* how often the thread looks for a new pull */

struct node_scrub {
    node_index *ix;
    uint64_t bytes_per_ms, cursor, last_ms;
    node_index_mark marks[SCRUB_MAX_MARKS];   /* seen not to match last step */
    size_t nmarks;
    node_index_mark bad[SCRUB_MAX_MARKS];     /* confirmed this step */
    size_t nbad;
    uint64_t (*pulls)(void *);                /* holdings pulls answered so far */
    void *pulls_arg;
    uint64_t step_pulls;                      /* pulls at the last step */
    pthread_t th;
    int running;
    pthread_mutex_t mu;                       /* stop, out */
    pthread_cond_t cv;
    int stop;
    node_index_mark out[SCRUB_MAX_MARKS];     /* confirmed, not taken yet */
    size_t nout;
};

static void clear(node_index_mark *v, size_t *n) {
    for (size_t i = 0; i < *n; i++) node_index_mark_free(&v[i]);
    *n = 0;
}

/* One step, right after a holdings pull: confirms the last step's
 * mismatches and reads on for the time since the last step; how many
 * were confirmed corrupt, in s->bad until the next step. */
static size_t step(node_scrub *s, uint64_t now_ms) {
    clear(s->bad, &s->nbad);
    for (size_t i = 0; i < s->nmarks; i++) {
        if (node_index_confirm(s->ix, &s->marks[i])) {
            s->bad[s->nbad++] = s->marks[i];
            s->marks[i].key = NULL;
        }
        node_index_mark_free(&s->marks[i]);
    }
    s->nmarks = 0;
    if (!s->bytes_per_ms) return s->nbad;
    uint64_t budget = s->last_ms ? (now_ms - s->last_ms) * s->bytes_per_ms : 0;
    s->last_ms = now_ms;
    if (budget > SCRUB_MAX_STEP) budget = SCRUB_MAX_STEP;
    if (budget) node_index_scrub(s->ix, &s->cursor, budget, s->marks, &s->nmarks, SCRUB_MAX_MARKS);
    return s->nbad;
}

/* A step once a pull sent after the last one was answered (a mismatch is
 * confirmed only after the notes of that moment are in); what it
 * confirmed waits in out for node_scrub_take (more than out holds are
 * found again on the next pass). */
static void *scrub_main(void *arg) {
    node_scrub *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        struct timespec ts = cond_deadline_ms(SCRUB_TICK_MS);
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        if (s->stop) break;
        pthread_mutex_unlock(&s->mu);
        uint64_t pulls = s->pulls(s->pulls_arg);
        size_t n = 0;
        if (pulls >= s->step_pulls + 2) {   /* the first answered may have left before */
            s->step_pulls = pulls;
            n = step(s, mono_ms());
        }
        pthread_mutex_lock(&s->mu);
        for (size_t i = 0; i < n && s->nout < SCRUB_MAX_MARKS; i++) {
            s->out[s->nout++] = s->bad[i];
            s->bad[i].key = NULL;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

node_scrub *node_scrub_start(node_index *ix, int mb_per_s, uint64_t (*pulls)(void *), void *arg) {
    node_scrub *s = xcalloc(1, sizeof *s);
    s->ix = ix;
    s->bytes_per_ms = mb_per_s > 0 ? (uint64_t)mb_per_s * 1024 * 1024 / 1000 : 0;
    s->pulls = pulls;
    s->pulls_arg = arg;
    pthread_mutex_init(&s->mu, NULL);
    cond_init_mono(&s->cv);
    s->running = s->bytes_per_ms && pthread_create(&s->th, NULL, scrub_main, s) == 0;
    return s;
}

size_t node_scrub_take(node_scrub *s, node_index_mark *out, size_t max) {
    pthread_mutex_lock(&s->mu);
    size_t n = s->nout < max ? s->nout : max;
    for (size_t i = 0; i < n; i++) out[i] = s->out[i];
    for (size_t i = n; i < s->nout; i++) s->out[i - n] = s->out[i];
    s->nout -= n;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void node_scrub_free(node_scrub *s) {
    if (!s) return;
    if (s->running) {
        pthread_mutex_lock(&s->mu);
        s->stop = 1;
        pthread_cond_signal(&s->cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->th, NULL);
    }
    clear(s->marks, &s->nmarks);
    clear(s->bad, &s->nbad);
    clear(s->out, &s->nout);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
    free(s);
}
