/* backend/shm_maps.c - see shm_maps.h. */
#include "backend/shm_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "backend/shm_warm.h"
#include "core/log.h"
#include "core/util.h"

#define WARM_NICE 10              /* gives way to event loops and copies */

struct shm_map {
    shm_map *next;                /* in maps.list while a path holds it */
    dev_t dev;
    ino_t ino;
    uint64_t size;
    uint64_t incarnation;         /* the node process that handed the fd out */
    char *base;
    int fd;                       /* the segment, for the paths' pread/pwrite while chunks are cold */
    shm_warm *warm;
    int users;                    /* paths holding it */
    int busy;                     /* the warmer is inside it: not to be unmapped */
    int done;                     /* every chunk warm */
    int mbps;
    uint64_t since_ms;
    uint64_t last_use_ms;         /* of the last transfer that asked (atomic) */
    int owner;                    /* pidfd of the node process that handed it out, or -1 */
    int dead;                     /* that process exited: pages dropped (atomic) */
};

typedef struct warmer {
    pthread_t thread;
    int stop;                     /* under maps.mu */
} warmer;

/* Process-wide by nature: a mapping, and the traps paid on its pages,
 * belong to the address space, not to one transport. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;            /* a new mapping, or a stop */
    shm_map *list;
    warmer *w;                    /* the thread, while the list is not empty */
    int new_owner;                /* an owner to watch since the thread last looked */
} maps = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, 0 };

static void unmap(shm_map *m) {
    munmap(m->base, (size_t)m->size);
    close(m->fd);
    if (m->owner >= 0) close(m->owner);
    shm_warm_free(m->warm);
    free(m);
}

/* ---- the owners ---- */

static int pidfd_of(int pid) {
#ifdef SYS_pidfd_open
    return pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
    (void)pid;
    return -1;
#endif
}

/* With maps.mu held, the warmer not inside m: its owner exited, so its
 * pages go (anonymous ones, never touched, take the range: a copy in
 * flight elsewhere reads zeros instead of faulting) and it serves no
 * more transfers. */
static void retire(shm_map *m) {
    void *at = mmap(m->base, (size_t)m->size, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
    if (at == MAP_FAILED) {
        log_warning("shm: cannot drop the mapping of an exited node's segment: %s", strerror(errno));
        return;
    }
    /* Its fd too, by number (paths pread through it): /dev/null takes it
     * over, so a read in flight ends short and a write lands nowhere. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0 || dup3(null, m->fd, O_CLOEXEC) < 0)
        log_warning("shm: cannot let go of an exited node's segment fd: %s", strerror(errno));
    if (null >= 0) close(null);
    close(m->owner);
    m->owner = -1;
    m->done = 1;   /* nothing to warm */
    __atomic_store_n(&m->dead, 1, __ATOMIC_RELEASE);
    log_notice("shm: the node process that handed out a %llu MB segment exited: its mapping dropped",
               (unsigned long long)(m->size >> 20));
}

/* With maps.mu held: mappings whose owner exited are retired; 1 if some
 * mapping still has an owner to watch. */
static int watch_owners(void) {
    int watching = 0;
    for (shm_map *m = maps.list; m; m = m->next) {
        if (m->owner < 0) continue;
        struct pollfd p = { .fd = m->owner, .events = POLLIN };
        if (poll(&p, 1, 0) > 0) retire(m);
        watching |= m->owner >= 0;
    }
    return watching;
}

/* Sweeping in order waits until the process's transfers, to every
 * mapping, have paused this long: under load only the chunks transfers
 * ask for are warmed, so the warmer's traps do not compete with the
 * requests for the cores. (Judged per mapping, a segment the gateway
 * reads no replica from, with --replicas 2, was swept through a GET run:
 * the warmer took as much CPU as the gateway's loop.) */
#define SWEEP_QUIET_MS 200
#define ASK_POLL_US 5000          /* how soon an asked chunk is noticed */

/* With maps.mu held: a mapping with a chunk a transfer asked for, else
 * the first cold one to sweep (*sweep set) when no mapping was used
 * lately, else NULL; *cold: some mapping is not warm. */
static shm_map *pick(int *sweep, int *cold) {
    shm_map *first_cold = NULL;
    uint64_t now = mono_ms();
    int busy = 0;
    *cold = 0;
    for (shm_map *m = maps.list; m; m = m->next) {
        uint64_t used = __atomic_load_n(&m->last_use_ms, __ATOMIC_RELAXED);
        busy |= used > now || now - used < SWEEP_QUIET_MS;   /* used after now was read: busy */
        if (m->done) continue;
        *cold = 1;
        if (shm_warm_asked(m->warm)) {
            *sweep = 0;
            return m;
        }
        if (!first_cold) first_cold = m;
    }
    *sweep = first_cold && !busy;
    return *sweep ? first_cold : NULL;
}

/* Called with maps.mu held: waits us microseconds unless stopped. */
static void nap(warmer *w, uint64_t us) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + us * 1000;
    ts.tv_sec += (time_t)(ns / 1000000000);
    ts.tv_nsec = (long)(ns % 1000000000);
    while (!w->stop && pthread_cond_timedwait(&maps.cv, &maps.mu, &ts) != ETIMEDOUT) {}
}

/* After a swept chunk that took busy_us: the rest of the time the chunk
 * may take at mbps (MB/s: bytes per us). */
static void pace(warmer *w, int mbps, uint64_t busy_us) {
    uint64_t want_us = SHM_WARM_CHUNK / (uint64_t)mbps;
    if (want_us > busy_us) nap(w, want_us - busy_us);
}

/* One chunk of one mapping per turn, outside the lock; the mapping stays
 * mapped meanwhile (busy), and is unmapped here if its last path let go
 * of it during the turn. */
static void *warm_main(void *arg) {
    warmer *w = arg;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), WARM_NICE);   /* nice is per thread */
    pthread_mutex_lock(&maps.mu);
    uint64_t watched_ms = 0;
    int watching = 0;
    while (!w->stop) {
        if (maps.new_owner || mono_ms() - watched_ms >= SHM_WATCH_MS) {
            maps.new_owner = 0;
            watching = watch_owners();
            watched_ms = mono_ms();
        }
        int sweep, cold;
        shm_map *m = pick(&sweep, &cold);
        if (!m) {
            if (cold) nap(w, ASK_POLL_US);
            else if (watching) nap(w, SHM_WATCH_MS * 1000ull);
            else pthread_cond_wait(&maps.cv, &maps.mu);
            continue;
        }
        m->busy = 1;
        pthread_mutex_unlock(&maps.mu);
        uint64_t t0 = mono_us();
        int got = shm_warm_step(m->warm, sweep);
        uint64_t busy_us = mono_us() - t0;
        pthread_mutex_lock(&maps.mu);
        m->busy = 0;
        if (!m->done && shm_warm_done(m->warm)) {
            m->done = 1;
            log_info("shm: %llu MB segment warm, %llu ms after it was mapped", (unsigned long long)(m->size >> 20),
                     (unsigned long long)(mono_ms() - m->since_ms));
        }
        if (m->users == 0) {      /* already off the list */
            pthread_mutex_unlock(&maps.mu);
            unmap(m);
            pthread_mutex_lock(&maps.mu);
        } else if (got == SHM_WARM_SWEPT) {
            pace(w, m->mbps, busy_us);
        }
    }
    pthread_mutex_unlock(&maps.mu);
    return NULL;
}

/* With maps.mu held: the thread, started unless it runs. A mapping works
 * without it, only through the fd until warm, that is always. */
static void warmer_ensure(void) {
    if (maps.w) return;
    warmer *w = xcalloc(1, sizeof *w);
    int rc = pthread_create(&w->thread, NULL, warm_main, w);
    if (rc != 0) {
        log_warning("shm: no warmer thread (%s): transfers take the fd path", strerror(rc));
        free(w);
        return;
    }
    maps.w = w;
}

static shm_map *find_locked(dev_t dev, ino_t ino, uint64_t size, uint64_t incarnation) {
    for (shm_map *m = maps.list; m; m = m->next)
        if (m->dev == dev && m->ino == ino && m->size == size && m->incarnation == incarnation && !m->dead) return m;
    return NULL;
}

static void push_locked(shm_map *m) {
    shm_map **at = &maps.list;
    while (*at) at = &(*at)->next;   /* at the end: older mappings warm first */
    *at = m;
}

static void unlink_locked(shm_map *m) {
    for (shm_map **at = &maps.list; *at; at = &(*at)->next)
        if (*at == m) {
            *at = m->next;
            return;
        }
}

shm_map *shm_map_get(int seg_fd, uint64_t size, uint64_t incarnation, int mbps, char *why, size_t whylen) {
    struct stat sb;
    if (size == 0 || size > SIZE_MAX || fstat(seg_fd, &sb) != 0) {
        snprintf(why, whylen, "segment of %llu bytes cannot be mapped", (unsigned long long)size);
        return NULL;
    }
    pthread_mutex_lock(&maps.mu);
    shm_map *m = find_locked(sb.st_dev, sb.st_ino, size, incarnation);
    if (m) m->users++;
    pthread_mutex_unlock(&maps.mu);
    if (m) return m;
    void *base = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, seg_fd, 0);
    if (base == MAP_FAILED) {
        snprintf(why, whylen, "mmap of the segment: %s", strerror(errno));
        return NULL;
    }
    int fd = fcntl(seg_fd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, whylen, "dup of the segment fd: %s", strerror(errno));
        munmap(base, (size_t)size);
        return NULL;
    }
#ifdef MADV_HUGEPAGE
    (void)madvise(base, (size_t)size, MADV_HUGEPAGE);   /* fewer pages to trap on, where shmem allows */
#endif
    pthread_mutex_lock(&maps.mu);
    if ((m = find_locked(sb.st_dev, sb.st_ino, size, incarnation))) {   /* another path mapped it meanwhile */
        m->users++;
        pthread_mutex_unlock(&maps.mu);
        munmap(base, (size_t)size);
        close(fd);
        return m;
    }
    m = xcalloc(1, sizeof *m);
    *m = (shm_map){ .dev = sb.st_dev, .ino = sb.st_ino, .size = size, .incarnation = incarnation, .base = base, .fd = fd,
                    .warm = shm_warm_new(base, size), .users = 1,
                    .mbps = mbps > 0 ? mbps : SHM_WARM_DEFAULT_MBPS, .since_ms = mono_ms(), .owner = -1 };
    m->last_use_ms = m->since_ms;   /* a path maps it to use it: ask first */
    push_locked(m);
    warmer_ensure();
    pthread_cond_broadcast(&maps.cv);
    pthread_mutex_unlock(&maps.mu);
    return m;
}

void shm_map_put(shm_map *m) {
    if (!m) return;
    warmer *stop = NULL;
    int unmap_now = 0;
    pthread_mutex_lock(&maps.mu);
    if (--m->users == 0) {
        unlink_locked(m);
        unmap_now = !m->busy;   /* else the warmer unmaps it when its chunk is done */
        if (!maps.list && (stop = maps.w)) {
            stop->stop = 1;
            maps.w = NULL;
            pthread_cond_broadcast(&maps.cv);
        }
    }
    pthread_mutex_unlock(&maps.mu);
    if (stop) {
        pthread_join(stop->thread, NULL);
        free(stop);
    }
    if (unmap_now) unmap(m);
}

void shm_map_watch(shm_map *m, int pid) {
    pthread_mutex_lock(&maps.mu);
    if (m->owner < 0 && !m->dead && (m->owner = pidfd_of(pid)) >= 0) {
        maps.new_owner = 1;
        warmer_ensure();
        pthread_cond_broadcast(&maps.cv);   /* from an untimed wait to watching */
    }
    pthread_mutex_unlock(&maps.mu);
}

int shm_map_dead(const shm_map *m) { return __atomic_load_n(&m->dead, __ATOMIC_ACQUIRE); }

char *shm_map_base(const shm_map *m) { return m->base; }

int shm_map_fd(const shm_map *m) { return m->fd; }

void shm_map_used(shm_map *m) { __atomic_store_n(&m->last_use_ms, mono_ms(), __ATOMIC_RELAXED); }

int shm_map_ready(shm_map *m, uint64_t off, uint64_t len) {
    return !shm_map_dead(m) && shm_warm_ready(m->warm, off, len);
}

uint64_t shm_map_cold_bytes(const shm_map *m) { return shm_map_dead(m) ? 0 : m->size - shm_warm_bytes(m->warm); }

uint64_t shm_maps_cold_bytes(void) {
    uint64_t cold = 0;
    pthread_mutex_lock(&maps.mu);
    for (shm_map *m = maps.list; m; m = m->next) cold += shm_map_cold_bytes(m);
    pthread_mutex_unlock(&maps.mu);
    return cold;
}
