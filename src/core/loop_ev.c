/* core/loop_ev.c - the event loop of loop.h on libev.
 *
 * Each file descriptor gets a slot with two ev_io watchers (read, write),
 * allocated the first time the fd is watched and kept for reuse, so that
 * arming an event is one array index and an ev_io_start: the same calls
 * libev would see if the caller held the watchers itself. Slots are
 * reached through an array of pointers because libev keeps pointers to
 * started watchers: growing the array must not move them.
 *
 * libev keeps the kernel's interest set lazily, so it must be told
 * (ev_io_set) when an fd number may have been closed and reused. A slot
 * is re-set after both its events were deleted in one call, as a caller
 * does before close, and not when an event is only paused: the epoll
 * calls are those of a fresh ev_io_init per connection.
 *
 * All before-sleep hooks share one ev_prepare, which runs them in
 * priority order. */
#include "core/loop.h"

#include <ev.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

typedef struct file_slot {
    ev_io rio, wio;
    event_loop *el;
    loop_file_proc *rproc, *wproc;
    void *data;
    int forgotten;     /* both events deleted: the fd may be a new file */
    /* loop_pause_read: the read watcher left running, unseen, so a pause
     * and resume before the fd is readable again (a parked request) cost
     * libev no epoll_ctl. Stopped for real if it turns readable. */
    int rmuted;
} file_slot;

struct loop_hook {
    event_loop *el;
    int priority;
    loop_proc *proc;
    void *data;
    loop_hook *next;
};

struct event_loop {
    struct ev_loop *ev;
    file_slot **files;     /* indexed by fd; NULL until first watched */
    int nfiles;
    ev_prepare prep;
    loop_hook *hooks;      /* ascending priority */
    loop_hook *hook_next;  /* the next hook of a running pass */
};

struct loop_timer {
    ev_timer w;
    event_loop *el;
    loop_proc *proc;
    void *data;
};

struct loop_wake {
    ev_async w;
    event_loop *el;
    loop_proc *proc;
    void *data;
};

struct loop_signal {
    ev_signal w;
    event_loop *el;
    loop_signal_proc *proc;
    void *data;
};

/* ---- Loop ------------------------------------------------------------------- */

/* libev's fatal system errors (a failed epoll_wait...) abort the process:
 * say which first, in the log's format. */
static void ev_fatal(const char *msg) {
    log_warning("event loop: fatal system error in %s: %s: aborting", msg, strerror(errno));
    abort();
}

event_loop *loop_create(void) {
    ev_set_syserr_cb(ev_fatal);
    struct ev_loop *ev = ev_loop_new(EVFLAG_AUTO);
    if (!ev) return NULL;
    event_loop *el = xcalloc(1, sizeof *el);
    el->ev = ev;
    return el;
}

void loop_destroy(event_loop *el) {
    if (!el) return;
    for (int fd = 0; fd < el->nfiles; fd++) free(el->files[fd]);
    free(el->files);
    ev_loop_destroy(el->ev);
    free(el);
}

void loop_run(event_loop *el) { ev_run(el->ev, 0); }

void loop_stop(event_loop *el) { ev_break(el->ev, EVBREAK_ALL); }

uint64_t loop_now_ms(event_loop *el) { return (uint64_t)(ev_now(el->ev) * 1000.0); }

/* ---- File events ------------------------------------------------------------ */

static void slot_read_cb(struct ev_loop *ev, ev_io *w, int revents) {
    file_slot *s = w->data;
    if (s->rmuted) {
        s->rmuted = 0;
        ev_io_stop(ev, w);
        return;
    }
    s->rproc(s->el, w->fd, s->data, LOOP_READABLE);
}

static void slot_write_cb(struct ev_loop *ev, ev_io *w, int revents) {
    file_slot *s = w->data;
    s->wproc(s->el, w->fd, s->data, LOOP_WRITABLE);
}

static file_slot *slot_get(event_loop *el, int fd) {
    if (fd >= el->nfiles) {
        int n = el->nfiles ? el->nfiles : 64;
        while (n <= fd) n *= 2;
        el->files = xrealloc(el->files, (size_t)n * sizeof *el->files);
        memset(el->files + el->nfiles, 0, (size_t)(n - el->nfiles) * sizeof *el->files);
        el->nfiles = n;
    }
    file_slot *s = el->files[fd];
    if (!s) {
        s = el->files[fd] = xcalloc(1, sizeof *s);
        s->el = el;
        ev_io_init(&s->rio, slot_read_cb, fd, EV_READ);
        ev_io_init(&s->wio, slot_write_cb, fd, EV_WRITE);
        s->rio.data = s->wio.data = s;
    }
    return s;
}

int loop_add_file(event_loop *el, int fd, int mask, loop_file_proc *proc, void *data) {
    if (fd < 0) return LOOP_ERR;
    file_slot *s = slot_get(el, fd);
    if (s->forgotten) {
        ev_io_set(&s->rio, fd, EV_READ);
        ev_io_set(&s->wio, fd, EV_WRITE);
        s->forgotten = 0;
    }
    s->data = data;
    if (mask & LOOP_READABLE) {
        s->rproc = proc;
        s->rmuted = 0;
        if (!ev_is_active(&s->rio)) ev_io_start(el->ev, &s->rio);
    }
    if (mask & LOOP_WRITABLE) {
        s->wproc = proc;
        if (!ev_is_active(&s->wio)) ev_io_start(el->ev, &s->wio);
    }
    return LOOP_OK;
}

/* Called after every flush: an inactive watcher is never pending, so it
 * needs no call into libev. */
void loop_del_file(event_loop *el, int fd, int mask) {
    if (fd < 0 || fd >= el->nfiles || !el->files[fd]) return;
    file_slot *s = el->files[fd];
    if (mask & LOOP_READABLE) s->rmuted = 0;
    if ((mask & LOOP_READABLE) && ev_is_active(&s->rio)) ev_io_stop(el->ev, &s->rio);
    if ((mask & LOOP_WRITABLE) && ev_is_active(&s->wio)) ev_io_stop(el->ev, &s->wio);
    if ((mask & (LOOP_READABLE | LOOP_WRITABLE)) == (LOOP_READABLE | LOOP_WRITABLE)) s->forgotten = 1;
}

void loop_pause_read(event_loop *el, int fd) {
    if (fd < 0 || fd >= el->nfiles || !el->files[fd]) return;
    file_slot *s = el->files[fd];
    if (ev_is_active(&s->rio)) s->rmuted = 1;
}

/* ---- Timers ----------------------------------------------------------------- */

static void timer_cb(struct ev_loop *ev, ev_timer *w, int revents) {
    loop_timer *t = w->data;
    t->proc(t->el, t->data);
}

loop_timer *loop_timer_create(event_loop *el, loop_proc *proc, void *data) {
    loop_timer *t = xmalloc(sizeof *t);
    *t = (loop_timer){.el = el, .proc = proc, .data = data};
    ev_timer_init(&t->w, timer_cb, 0, 0);
    t->w.data = t;
    return t;
}

void loop_timer_start(loop_timer *t, long long after_ms, long long repeat_ms) {
    ev_timer_stop(t->el->ev, &t->w);
    ev_timer_set(&t->w, after_ms / 1000.0, repeat_ms / 1000.0);
    ev_timer_start(t->el->ev, &t->w);
}

void loop_timer_stop(loop_timer *t) { ev_timer_stop(t->el->ev, &t->w); }

int loop_timer_active(const loop_timer *t) { return ev_is_active(&t->w); }

void loop_timer_free(loop_timer *t) {
    if (!t) return;
    loop_timer_stop(t);
    free(t);
}

/* ---- Wakes ------------------------------------------------------------------ */

static void wake_cb(struct ev_loop *ev, ev_async *w, int revents) {
    loop_wake *k = w->data;
    k->proc(k->el, k->data);
}

loop_wake *loop_wake_create(event_loop *el, loop_proc *proc, void *data) {
    loop_wake *k = xmalloc(sizeof *k);
    *k = (loop_wake){.el = el, .proc = proc, .data = data};
    ev_async_init(&k->w, wake_cb);
    k->w.data = k;
    ev_async_start(el->ev, &k->w);
    ev_unref(el->ev);   /* a wake alone does not keep the loop running */
    return k;
}

void loop_wake_send(loop_wake *w) { ev_async_send(w->el->ev, &w->w); }

void loop_wake_free(loop_wake *w) {
    if (!w) return;
    ev_ref(w->el->ev);
    ev_async_stop(w->el->ev, &w->w);
    free(w);
}

/* ---- Signals ---------------------------------------------------------------- */

static void signal_cb(struct ev_loop *ev, ev_signal *w, int revents) {
    loop_signal *s = w->data;
    s->proc(s->el, w->signum, s->data);
}

loop_signal *loop_signal_create(event_loop *el, int signum, loop_signal_proc *proc, void *data) {
    loop_signal *s = xmalloc(sizeof *s);
    *s = (loop_signal){.el = el, .proc = proc, .data = data};
    ev_signal_init(&s->w, signal_cb, signum);
    s->w.data = s;
    ev_signal_start(el->ev, &s->w);
    return s;
}

void loop_signal_free(loop_signal *s) {
    if (!s) return;
    ev_signal_stop(s->el->ev, &s->w);
    free(s);
}

/* ---- Before-sleep hooks ----------------------------------------------------- */

static void prepare_cb(struct ev_loop *ev, ev_prepare *w, int revents) {
    event_loop *el = w->data;
    for (loop_hook *h = el->hooks; h; h = el->hook_next) {
        el->hook_next = h->next;
        h->proc(el, h->data);
    }
    el->hook_next = NULL;
}

loop_hook *loop_hook_add(event_loop *el, int priority, loop_proc *proc, void *data) {
    loop_hook *h = xmalloc(sizeof *h);
    *h = (loop_hook){.el = el, .priority = priority, .proc = proc, .data = data};
    loop_hook **at = &el->hooks;
    while (*at && (*at)->priority <= priority) at = &(*at)->next;
    h->next = *at;
    *at = h;
    if (!ev_is_active(&el->prep)) {
        ev_prepare_init(&el->prep, prepare_cb);
        el->prep.data = el;
        ev_prepare_start(el->ev, &el->prep);
    }
    return h;
}

void loop_hook_del(loop_hook *h) {
    if (!h) return;
    event_loop *el = h->el;
    loop_hook **at = &el->hooks;
    while (*at && *at != h) at = &(*at)->next;
    if (*at) *at = h->next;
    if (el->hook_next == h) el->hook_next = h->next;
    if (!el->hooks) ev_prepare_stop(el->ev, &el->prep);
    free(h);
}
