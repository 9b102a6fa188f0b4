/* node/scrub.c - see scrub.h. */
#include "node/scrub.h"

#include <stdlib.h>

#include "core/util.h"

struct node_scrub {
    node_index *ix;
    uint64_t bytes_per_ms, cursor, last_ms;
    node_index_mark marks[SCRUB_MAX_MARKS];   /* seen not to match last step */
    size_t nmarks;
    node_index_mark bad[SCRUB_MAX_MARKS];     /* confirmed this step */
    size_t nbad;
};

node_scrub *node_scrub_create(node_index *ix, int mb_per_s) {
    node_scrub *s = xcalloc(1, sizeof *s);
    s->ix = ix;
    s->bytes_per_ms = mb_per_s > 0 ? (uint64_t)mb_per_s * 1024 * 1024 / 1000 : 0;
    return s;
}

static void clear(node_index_mark *v, size_t *n) {
    for (size_t i = 0; i < *n; i++) node_index_mark_free(&v[i]);
    *n = 0;
}

void node_scrub_free(node_scrub *s) {
    if (!s) return;
    clear(s->marks, &s->nmarks);
    clear(s->bad, &s->nbad);
    free(s);
}

size_t node_scrub_step(node_scrub *s, uint64_t now_ms, const node_index_mark **bad) {
    clear(s->bad, &s->nbad);
    for (size_t i = 0; i < s->nmarks; i++) {
        if (node_index_confirm(s->ix, &s->marks[i])) {
            s->bad[s->nbad++] = s->marks[i];
            s->marks[i].key = NULL;
        }
        node_index_mark_free(&s->marks[i]);
    }
    s->nmarks = 0;
    *bad = s->bad;
    if (!s->bytes_per_ms) return s->nbad;
    uint64_t budget = s->last_ms ? (now_ms - s->last_ms) * s->bytes_per_ms : 0;
    s->last_ms = now_ms;
    if (budget > SCRUB_MAX_STEP) budget = SCRUB_MAX_STEP;
    if (budget) node_index_scrub(s->ix, &s->cursor, budget, s->marks, &s->nmarks, SCRUB_MAX_MARKS);
    return s->nbad;
}
