/* client/pinkeep.c - pins follow a new leader at once, not at the
 * client's next call.
 *
 * A new leader holds none of the pins (they live in the leader's memory):
 * the client pins them again on every master connection it opens
 * (pins.c). A client that makes no call after an election would leave
 * its pinned keys open to anyone's remove, so while it holds live pins a
 * thread of its core watches the master connection: the old leader's
 * socket closing (kill, crash, restart) or, with etcd, the leader
 * watch naming another leader (a stalled one; leader_watch_keep makes
 * it look every LW_KEEP_MS while pins live) breaks the connection, and
 * the thread opens the next one at once, retrying every KEEP_RETRY_MS
 * until a leader answers: that open re-pins before anything else. The
 * new leader holds every remove for PROTO_REPIN_GRACE_MS after its
 * election (proto/pins.h), the time this takes. The thread starts with
 * the first pin and idles without pins (no etcd looks, no reconnects). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "client/client.h"
#include "core/util.h"

#define KEEP_RETRY_MS 250    /* no leader answered: the next attempt */
#define KEEP_LOOK_MS  1000   /* pins expire: count them again this often */

static void keeper_drain(int fd) {
    uint64_t v;
    while (read(fd, &v, sizeof v) < 0 && errno == EINTR) {}
}

/* One turn: open the connection for the pins, or wait on it (or, with no
 * live pins, on the wake alone). 0 while running, -1 when told to stop. */
static int keeper_turn(mkv_core *k, mkv_client *me) {
    mkv_pins *p = &k->pins;
    pthread_mutex_lock(&p->mu);
    int stop = p->stop, live = !stop && mkv_pins_live(p, mono_ms());
    pthread_mutex_unlock(&p->mu);
    if (stop) return -1;
    uint64_t id;
    int fd = mkv_link_peek(&k->link, live, &id);
    struct pollfd pf[2] = {{.fd = p->wake, .events = POLLIN}, {.fd = -1}};
    int wait_ms = -1;
    if (live && fd < 0) {
        if (mkv_link_open(me) == MKV_OK) {   /* re-pinned before any other command */
            __atomic_add_fetch(&p->repins, 1, __ATOMIC_RELAXED);
            return 0;
        }
        wait_ms = KEEP_RETRY_MS;
    } else if (live) {
        pf[1] = (struct pollfd){.fd = fd, .events = POLLRDHUP};
        wait_ms = KEEP_LOOK_MS;
    }
    if (poll(pf, 2, wait_ms) <= 0) return 0;
    if (pf[0].revents) keeper_drain(p->wake);
    /* fd may have been closed and reused meanwhile: the id says whether
     * it is still the connection looked at. */
    if (pf[1].fd >= 0 && (pf[1].revents & (POLLRDHUP | POLLHUP | POLLERR)))
        mkv_link_drop_id(&k->link, id);
    return 0;
}

static void *keeper_main(void *arg) {
    mkv_core *k = arg;
    mkv_client me;   /* mkv_link_open reads only its core (errors go to the thread's own) */
    memset(&me, 0, sizeof me);
    me.core = k;
    while (keeper_turn(k, &me) == 0) {}
    return NULL;
}

void mkv_pinkeep_start(mkv_core *k) {
    mkv_pins *p = &k->pins;
    pthread_mutex_lock(&p->mu);
    if (!p->keeping && !p->stop) {
        p->wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        p->keeping = p->wake >= 0 && pthread_create(&p->keeper, NULL, keeper_main, k) == 0;
        if (!p->keeping && p->wake >= 0) close(p->wake);   /* the next call re-pins, as before */
    }
    int wake = p->keeping ? p->wake : -1;
    pthread_mutex_unlock(&p->mu);
    uint64_t one = 1;
    if (wake >= 0 && write(wake, &one, sizeof one) < 0) {}   /* full: it is awake anyway */
}

void mkv_pinkeep_stop(mkv_core *k) {
    mkv_pins *p = &k->pins;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    int keeping = p->keeping;
    pthread_mutex_unlock(&p->mu);
    if (!keeping) return;
    uint64_t one = 1;
    if (write(p->wake, &one, sizeof one) < 0) {}
    pthread_join(p->keeper, NULL);   /* an open in progress ends within the client's timeout */
    close(p->wake);
    p->keeping = 0;
}
