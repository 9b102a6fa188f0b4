/* core/cond.h - condition variables timed on the monotonic clock, so a
 * step of the wall clock neither cuts a thread's nap short nor makes it
 * sleep on. */
#ifndef MKV_COND_H
#define MKV_COND_H

#include <pthread.h>
#include <time.h>

/* cv initialised to time its waits on CLOCK_MONOTONIC. */
void cond_init_mono(pthread_cond_t *cv);
/* The CLOCK_MONOTONIC time ms from now: pthread_cond_timedwait's
 * deadline on a cv of cond_init_mono. */
struct timespec cond_deadline_ms(long long ms);

#endif
