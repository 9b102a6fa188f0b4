/* core/loop.h - the event loop every role runs on, in the manner of
 * Redis's ae.h: file events, timers, a cross-thread wake, signals and
 * ordered before-sleep hooks. loop_ev.c implements it on libev; nothing
 * else includes <ev.h>.
 *
 * File events are kept per file descriptor (one read and one write
 * callback, one data pointer), so arming and disarming them on the request
 * path allocates nothing. Timers, wakes, signals and hooks are handles,
 * allocated once when created. Everything but loop_wake_send is for the
 * loop's own thread. */
#ifndef MKV_LOOP_H
#define MKV_LOOP_H

#include <stdint.h>

#define LOOP_OK 0
#define LOOP_ERR -1

#define LOOP_READABLE 1
#define LOOP_WRITABLE 2

typedef struct event_loop event_loop;
typedef struct loop_timer loop_timer;
typedef struct loop_wake loop_wake;
typedef struct loop_signal loop_signal;
typedef struct loop_hook loop_hook;

/* mask is the one event that fired (LOOP_READABLE or LOOP_WRITABLE). */
typedef void loop_file_proc(event_loop *el, int fd, void *data, int mask);
/* Timers, wakes and hooks. */
typedef void loop_proc(event_loop *el, void *data);
typedef void loop_signal_proc(event_loop *el, int signum, void *data);

event_loop *loop_create(void);   /* NULL if the backend cannot start */
/* Everything registered must have been removed or freed first. */
void loop_destroy(event_loop *el);

/* Runs until loop_stop (or until nothing keeps it running); loop_stop
 * may be called from any callback. */
void loop_run(event_loop *el);
void loop_stop(event_loop *el);
/* The wall clock in ms as of this iteration's wake-up, without reading
 * the clock: for coarse stamps where a clock jump is harmless (a read of
 * the clock per request was a few % of a busy loop). */
uint64_t loop_now_ms(event_loop *el);

/* Watch fd for mask (LOOP_READABLE and/or LOOP_WRITABLE); proc is called
 * for those events, data is the fd's one data pointer (the last add sets
 * it). Adding an event already watched only updates proc and data.
 * LOOP_ERR for a negative fd. */
int loop_add_file(event_loop *el, int fd, int mask, loop_file_proc *proc, void *data);
/* Stop watching mask on fd; unwatched events are fine. Before closing
 * fd, delete both events in one call (LOOP_READABLE | LOOP_WRITABLE):
 * that tells the loop the number may come back as another file. */
void loop_del_file(event_loop *el, int fd, int mask);
/* As loop_del_file(el, fd, LOOP_READABLE), for a pause that
 * loop_add_file ends: until the fd turns readable the loop's poller is
 * not told (a parked request resumed costs no system call). Not before a
 * close: loop_del_file both events then. */
void loop_pause_read(event_loop *el, int fd);

/* A timer, stopped until started. */
loop_timer *loop_timer_create(event_loop *el, loop_proc *proc, void *data);
/* Fire after after_ms, then every repeat_ms (0: once). Restarts a
 * running timer. */
void loop_timer_start(loop_timer *t, long long after_ms, long long repeat_ms);
void loop_timer_stop(loop_timer *t);
int loop_timer_active(const loop_timer *t);
void loop_timer_free(loop_timer *t);   /* stops it; NULL is fine */

/* A wake: loop_wake_send from any thread makes the loop call proc soon
 * (several sends may give one call). A wake alone does not keep
 * loop_run running. */
loop_wake *loop_wake_create(event_loop *el, loop_proc *proc, void *data);
void loop_wake_send(loop_wake *w);
void loop_wake_free(loop_wake *w);     /* NULL is fine */

/* Deliver signum to proc on the loop while the handle lives. */
loop_signal *loop_signal_create(event_loop *el, int signum, loop_signal_proc *proc, void *data);
void loop_signal_free(loop_signal *s); /* NULL is fine */

/* Run proc each time before the loop waits for events. Hooks run in
 * ascending priority, equal priorities in the order added. A hook may
 * add and remove hooks, itself included. */
loop_hook *loop_hook_add(event_loop *el, int priority, loop_proc *proc, void *data);
void loop_hook_del(loop_hook *h);      /* NULL is fine */

#endif
