/* core/sweep.h - a sweep run before the loop sleeps and at its earliest
 * deadline.
 *
 * Parked requests are answered from the loop, not from inside the
 * command that parked them: whatever changed in an iteration is looked at
 * once, just before the loop sleeps (so one iteration's news go out
 * together), and a timer wakes the loop for the earliest bound in case
 * nothing else does. The owner says when that bound is (sweep_arm); the
 * timer is touched only when the bound changes. */
#ifndef MKV_CORE_SWEEP_H
#define MKV_CORE_SWEEP_H

#include <stdint.h>

#include "core/loop.h"

typedef struct sweep sweep;
/* timed: 1 when the deadline woke it, 0 before a sleep. */
typedef void sweep_fn(void *data, int timed);

/* run(data) before each sleep (a hook of the given priority: see
 * loop_hook_add) and when the armed deadline passes. */
sweep *sweep_create(event_loop *el, int hook_priority, sweep_fn *run, void *data);
/* Wake by at_ms (UINT64_MAX: no deadline), given now_ms on the same clock. */
void sweep_arm(sweep *s, uint64_t at_ms, uint64_t now_ms);
void sweep_free(sweep *s);   /* NULL is fine */

#endif
