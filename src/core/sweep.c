/* core/sweep.c - a before-sleep hook and one timer behind sweep.h. */
#include <stdlib.h>

#include "core/sweep.h"
#include "core/util.h"

struct sweep {
    loop_timer *timer;
    loop_hook *hook;
    sweep_fn *run;
    void *data;
    uint64_t armed_ms;   /* the timer's deadline, UINT64_MAX: stopped */
};

static void on_hook(event_loop *el, void *data) {
    sweep *s = data;
    s->run(s->data, 0);
}

static void on_timer(event_loop *el, void *data) {
    sweep *s = data;
    s->armed_ms = UINT64_MAX;   /* one-shot: it has stopped */
    s->run(s->data, 1);
}

sweep *sweep_create(event_loop *el, int hook_priority, sweep_fn *run, void *data) {
    sweep *s = xcalloc(1, sizeof *s);
    s->run = run;
    s->data = data;
    s->armed_ms = UINT64_MAX;
    s->timer = loop_timer_create(el, on_timer, s);
    s->hook = loop_hook_add(el, hook_priority, on_hook, s);
    return s;
}

void sweep_arm(sweep *s, uint64_t at_ms, uint64_t now_ms) {
    if (at_ms == s->armed_ms) return;
    s->armed_ms = at_ms;
    if (at_ms == UINT64_MAX) loop_timer_stop(s->timer);
    else loop_timer_start(s->timer, at_ms > now_ms ? (long long)(at_ms - now_ms) : 1, 0);
}

void sweep_free(sweep *s) {
    if (!s) return;
    loop_timer_free(s->timer);
    loop_hook_del(s->hook);
    free(s);
}
