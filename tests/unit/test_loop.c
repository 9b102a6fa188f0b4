/* tests/unit/test_loop.c - the event-loop facade (core/loop.h): file
 * events on a pipe, one-shot and repeating timers, a wake sent from
 * another thread, signals, before-sleep hooks in priority order (and
 * removal from inside a pass), fd slots reused after a close (the
 * number comes back as a new pipe, which libev must be told about), a
 * read paused and resumed. */
#include "core/loop.h"
#include "core/util.h"
#include "test.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

typedef struct pipe_state {
    int reads, writes;
    char got[8];
    int ngot;
} pipe_state;

static void on_read(event_loop *el, int fd, void *data, int mask) {
    pipe_state *p = data;
    p->reads++;
    ssize_t n = read(fd, p->got + p->ngot, sizeof p->got - (size_t)p->ngot);
    if (n > 0) p->ngot += (int)n;
    if (mask != LOOP_READABLE || p->ngot >= 3) loop_stop(el);
}

static void on_write(event_loop *el, int fd, void *data, int mask) {
    pipe_state *p = data;
    p->writes++;
    if (mask == LOOP_WRITABLE && write(fd, "abc", 3) == 3) loop_del_file(el, fd, LOOP_WRITABLE);
}

static void test_file_events(void) {
    event_loop *el = loop_create();
    ASSERT(el != NULL);
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pipe_state p = {0};
    ASSERT_EQ(loop_add_file(el, -1, LOOP_READABLE, on_read, &p), LOOP_ERR);
    ASSERT_EQ(loop_add_file(el, fds[0], LOOP_READABLE, on_read, &p), LOOP_OK);
    ASSERT_EQ(loop_add_file(el, fds[1], LOOP_WRITABLE, on_write, &p), LOOP_OK);
    loop_run(el);
    ASSERT_EQ(p.ngot, 3);
    ASSERT_MEMEQ(p.got, "abc", 3);
    ASSERT_EQ(p.writes, 1);   /* disarmed after the one write */
    loop_del_file(el, fds[0], LOOP_READABLE | LOOP_WRITABLE);
    loop_del_file(el, fds[1], LOOP_READABLE | LOOP_WRITABLE);
    close(fds[0]);
    close(fds[1]);

    /* The same fd numbers again: the slots are reused, the new data wins. */
    ASSERT(pipe(fds) == 0);
    pipe_state q = {0};
    int reads_before = p.reads;
    ASSERT_EQ(loop_add_file(el, fds[0], LOOP_READABLE, on_read, &q), LOOP_OK);
    ASSERT(write(fds[1], "xyz", 3) == 3);
    loop_run(el);
    ASSERT_EQ(q.ngot, 3);
    ASSERT_EQ(p.reads, reads_before);   /* the old callback's data is not used */
    ASSERT_MEMEQ(q.got, "xyz", 3);
    loop_del_file(el, fds[0], LOOP_READABLE | LOOP_WRITABLE);
    loop_del_file(el, fds[0], LOOP_READABLE);   /* twice is fine */
    loop_del_file(el, 100000, LOOP_READABLE);   /* never watched */
    close(fds[0]);
    close(fds[1]);
    loop_destroy(el);
}

typedef struct tick_state {
    int once, every;
    loop_timer *repeat;
} tick_state;

static void on_once(event_loop *el, void *data) { ((tick_state *)data)->once++; }

static void on_every(event_loop *el, void *data) {
    tick_state *t = data;
    if (++t->every == 3) {
        loop_timer_stop(t->repeat);
        loop_stop(el);
    }
}

static void on_stop(event_loop *el, void *data) { loop_stop(el); }

/* loop_pause_read: no read callback while paused, even with bytes
 * waiting; loop_add_file resumes it, whether the fd turned readable
 * during the pause (its watcher was stopped for real then) or not. */
static void test_pause_read(void) {
    event_loop *el = loop_create();
    loop_timer *stop = loop_timer_create(el, on_stop, NULL);
    int fds[2];
    ASSERT(pipe(fds) == 0);
    pipe_state p = {0};
    ASSERT_EQ(loop_add_file(el, fds[0], LOOP_READABLE, on_read, &p), LOOP_OK);
    loop_pause_read(el, fds[0]);
    loop_add_file(el, fds[0], LOOP_READABLE, on_read, &p);   /* resumed before any bytes */
    ASSERT(write(fds[1], "abc", 3) == 3);
    loop_run(el);
    ASSERT_EQ(p.ngot, 3);
    pipe_state q = {0};
    loop_add_file(el, fds[0], LOOP_READABLE, on_read, &q);
    loop_pause_read(el, fds[0]);
    ASSERT(write(fds[1], "xyz", 3) == 3);
    loop_timer_start(stop, 30, 0);
    loop_run(el);
    ASSERT_EQ(q.reads, 0);   /* readable the whole time, paused */
    loop_pause_read(el, fds[0]);   /* again: nothing changes */
    loop_add_file(el, fds[0], LOOP_READABLE, on_read, &q);
    loop_timer_start(stop, 2000, 0);
    loop_run(el);
    ASSERT_EQ(q.ngot, 3);
    ASSERT_MEMEQ(q.got, "xyz", 3);
    loop_pause_read(el, -1);
    loop_pause_read(el, 100000);   /* never watched */
    loop_del_file(el, fds[0], LOOP_READABLE | LOOP_WRITABLE);
    close(fds[0]);
    close(fds[1]);
    loop_timer_free(stop);
    loop_destroy(el);
}

static void test_timers(void) {
    event_loop *el = loop_create();
    tick_state t = {0};
    loop_timer *once = loop_timer_create(el, on_once, &t);
    t.repeat = loop_timer_create(el, on_every, &t);
    ASSERT(!loop_timer_active(once));
    loop_timer_start(once, 1, 0);
    loop_timer_start(t.repeat, 5, 5);
    ASSERT(loop_timer_active(once));
    loop_run(el);
    ASSERT_EQ(t.once, 1);
    ASSERT_EQ(t.every, 3);
    ASSERT(!loop_timer_active(once));
    ASSERT(!loop_timer_active(t.repeat));
    /* A restarted timer fires once more. */
    loop_timer_start(once, 1, 0);
    loop_run(el);   /* returns: nothing else keeps the loop running */
    ASSERT_EQ(t.once, 2);
    loop_timer_free(once);
    loop_timer_free(t.repeat);
    loop_timer_free(NULL);
    loop_destroy(el);
}

/* loop_now_ms is the wall clock as of the wake-up: a timer 30 ms out
 * sees at least 25 ms passed and no time from the future. */
typedef struct now_state {
    event_loop *el;
    uint64_t seen;
} now_state;

static void on_now(event_loop *el, void *data) { ((now_state *)data)->seen = loop_now_ms(el); }

static void test_now(void) {
    now_state st = {loop_create(), 0};
    loop_timer *t = loop_timer_create(st.el, on_now, &st);
    uint64_t start = wall_ms();
    loop_timer_start(t, 30, 0);
    loop_run(st.el);
    ASSERT_MSG(st.seen >= start + 25 && st.seen <= wall_ms(), "start %llu seen %llu",
               (unsigned long long)start, (unsigned long long)st.seen);
    loop_timer_free(t);
    loop_destroy(st.el);
}

typedef struct wake_state {
    loop_wake *w;
    int calls;
} wake_state;

static void on_wake(event_loop *el, void *data) {
    ((wake_state *)data)->calls++;
    loop_stop(el);
}

static void *sender(void *arg) {
    usleep(10000);
    loop_wake_send(((wake_state *)arg)->w);
    return NULL;
}

static void on_keepalive(event_loop *el, void *data) {}

static void test_wake_from_thread(void) {
    event_loop *el = loop_create();
    wake_state s = {0};
    s.w = loop_wake_create(el, on_wake, &s);
    /* A wake alone does not keep the loop running: a timer does. */
    loop_timer *keep = loop_timer_create(el, on_keepalive, NULL);
    loop_timer_start(keep, 10000, 0);
    pthread_t tid;
    ASSERT(pthread_create(&tid, NULL, sender, &s) == 0);
    loop_run(el);
    pthread_join(tid, NULL);
    ASSERT_EQ(s.calls, 1);
    loop_timer_free(keep);
    loop_run(el);   /* only the wake is left: returns at once */
    ASSERT_EQ(s.calls, 1);
    loop_wake_free(s.w);
    loop_destroy(el);
}

static void on_signal(event_loop *el, int signum, void *data) {
    *(int *)data = signum;
    loop_stop(el);
}

static void test_signal(void) {
    event_loop *el = loop_create();
    int got = 0;
    loop_signal *s = loop_signal_create(el, SIGUSR1, on_signal, &got);
    ASSERT(kill(getpid(), SIGUSR1) == 0);
    loop_run(el);
    ASSERT_EQ(got, SIGUSR1);
    loop_signal_free(s);
    loop_destroy(el);
}

typedef struct hook_state {
    char order[32];
    int n;
    int passes;
    loop_hook *h[4];
    loop_timer *t;
} hook_state;

static void hook_mark(hook_state *s, char c) {
    if (s->n < (int)sizeof s->order - 1) s->order[s->n++] = c;
}

static void hook_a(event_loop *el, void *data) { hook_mark(data, 'a'); }
static void hook_b(event_loop *el, void *data) { hook_mark(data, 'b'); }
static void hook_c(event_loop *el, void *data) {
    hook_state *s = data;
    hook_mark(s, 'c');
    /* Removing the next hook from inside a pass: it does not run. */
    loop_hook_del(s->h[3]);
    s->h[3] = NULL;
}
static void hook_d(event_loop *el, void *data) { hook_mark(data, 'd'); }

static void hook_tick(event_loop *el, void *data) {
    hook_state *s = data;
    if (++s->passes == 2) loop_stop(el);
    else loop_timer_start(s->t, 1, 0);
}

static void test_hooks_in_priority_order(void) {
    event_loop *el = loop_create();
    hook_state s;
    memset(&s, 0, sizeof s);
    s.h[0] = loop_hook_add(el, 100, hook_b, &s);
    s.h[1] = loop_hook_add(el, 50, hook_a, &s);
    s.h[2] = loop_hook_add(el, 100, hook_c, &s);   /* after b: same priority, added later */
    s.h[3] = loop_hook_add(el, 200, hook_d, &s);
    s.t = loop_timer_create(el, hook_tick, &s);
    loop_timer_start(s.t, 1, 0);
    loop_run(el);
    /* Every pass runs a b c (d was removed by c in the first); at least
     * one pass per timer tick. */
    ASSERT(s.n >= 6 && s.n % 3 == 0);
    for (int i = 0; i < s.n; i += 3) ASSERT_MSG(memcmp(s.order + i, "abc", 3) == 0, "order %s", s.order);
    for (int i = 0; i < 3; i++) loop_hook_del(s.h[i]);
    loop_hook_del(NULL);
    loop_timer_free(s.t);
    loop_destroy(el);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN_TEST(test_file_events);
    RUN_TEST(test_pause_read);
    RUN_TEST(test_timers);
    RUN_TEST(test_now);
    RUN_TEST(test_wake_from_thread);
    RUN_TEST(test_signal);
    RUN_TEST(test_hooks_in_priority_order);
    TEST_EXIT();
}
