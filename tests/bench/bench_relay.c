/* bench_relay - a TCP relay that holds every chunk DELAY_US microseconds
 * in each direction: added round-trip time for the bench on a kernel
 * without netem (bench step 7, "relay-delayed" rows).
 *
 *   bench_relay DELAY_US NETNS_PATH IP PORT...
 *
 * Listens on IP:PORT (each PORT) in the namespace it runs in, and for each
 * connection dials the same IP:PORT inside the network namespace at
 * NETNS_PATH (/run/netns/NAME), where the servers are. So the servers
 * bind and announce IP, and a client beside the relay reaches them only
 * through it. Per direction, a reader stamps each chunk as it arrives and
 * a writer sends it DELAY_US after that stamp, so a stream is delayed, not
 * slowed: chunks keep flowing while earlier ones wait. A chunk is a pipe:
 * the bytes are spliced from one socket into it and from it into the
 * other, so the relay copies none of them (with read/write it copied each
 * byte twice, and on 2 cores its copies were what bounded a batch through
 * it, where netem would have cost nothing). Runs until killed. A relay
 * adds its own hop (two more sockets, thread wake-ups) on top of the
 * delay; the bench measures a PING through it to say what the round trip
 * really became. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK       (256u << 10)   /* pipe capacity asked for */
#define QUEUE_CHUNKS 64            /* a direction's chunks in flight at most */
#define MAX_PORTS   64

typedef struct chunk {
    struct chunk *next;
    uint64_t due_ns;
    size_t len;
    int p[2];                 /* the pipe holding the bytes */
} chunk;

/* One direction: from -> to, through a queue of stamped chunks. Sent
 * chunks (empty pipes) go back on a free list for the reader. */
typedef struct pipe_dir {
    int from, to;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    chunk *head, *tail;
    chunk *spare;             /* sent chunks, for the reader to fill again */
    size_t queued;            /* chunks */
    int eof;
} pipe_dir;

static uint64_t delay_ns;
static int target_ns_fd = -1;
static struct in_addr ip;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_until(uint64_t t) {
    struct timespec ts = {(time_t)(t / 1000000000ull), (long)(t % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {}
}

static void chunk_free(chunk *c) {
    close(c->p[0]);
    close(c->p[1]);
    free(c);
}

static chunk *chunk_new(void) {
    chunk *c = malloc(sizeof *c);
    if (c && pipe2(c->p, O_CLOEXEC) != 0) {
        free(c);
        return NULL;
    }
    if (c) (void)fcntl(c->p[1], F_SETPIPE_SZ, CHUNK);   /* else the default 64 KiB */
    return c;
}

static chunk *chunk_get(pipe_dir *d) {
    pthread_mutex_lock(&d->mu);
    chunk *c = d->spare;
    if (c) d->spare = c->next;
    pthread_mutex_unlock(&d->mu);
    return c ? c : chunk_new();
}

/* Called with d->mu held. */
static void chunk_put(pipe_dir *d, chunk *c) {
    c->next = d->spare;
    d->spare = c;
}

static void chunks_free(chunk *c) {
    while (c) {
        chunk *x = c;
        c = c->next;
        chunk_free(x);
    }
}

static void *reader(void *arg) {
    pipe_dir *d = arg;
    for (;;) {
        chunk *c = chunk_get(d);
        ssize_t n = c ? splice(d->from, NULL, c->p[1], NULL, CHUNK, SPLICE_F_MOVE) : -1;
        if (c && n < 0 && errno == EINTR) {
            pthread_mutex_lock(&d->mu);
            chunk_put(d, c);   /* still empty */
            pthread_mutex_unlock(&d->mu);
            continue;
        }
        pthread_mutex_lock(&d->mu);
        if (n <= 0) {
            if (c) chunk_free(c);
            d->eof = 1;
            pthread_cond_broadcast(&d->cv);
            pthread_mutex_unlock(&d->mu);
            return NULL;
        }
        c->due_ns = now_ns() + delay_ns;
        c->len = (size_t)n;
        c->next = NULL;
        while (d->queued >= QUEUE_CHUNKS && !d->eof) pthread_cond_wait(&d->cv, &d->mu);
        if (d->eof) {   /* the writer gave up: nobody takes this any more */
            pthread_mutex_unlock(&d->mu);
            chunk_free(c);
            return NULL;
        }
        if (d->tail) d->tail->next = c;
        else d->head = c;
        d->tail = c;
        d->queued++;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
    }
}

/* Everything in the chunk's pipe into fd. */
static int send_chunk(int fd, chunk *c) {
    for (size_t n = c->len; n;) {
        ssize_t w = splice(c->p[0], NULL, fd, NULL, n, SPLICE_F_MOVE);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        n -= (size_t)w;
    }
    return 0;
}

static void *writer(void *arg) {
    pipe_dir *d = arg;
    prctl(PR_SET_TIMERSLACK, 1UL);   /* wake on time, not 50 us late */
    for (;;) {
        pthread_mutex_lock(&d->mu);
        while (!d->head && !d->eof) pthread_cond_wait(&d->cv, &d->mu);
        chunk *c = d->head;
        if (!c) {   /* eof and drained */
            pthread_mutex_unlock(&d->mu);
            shutdown(d->to, SHUT_WR);
            return NULL;
        }
        d->head = c->next;
        if (!d->head) d->tail = NULL;
        d->queued--;
        pthread_cond_broadcast(&d->cv);
        pthread_mutex_unlock(&d->mu);
        if (now_ns() < c->due_ns) sleep_until(c->due_ns);
        int bad = send_chunk(d->to, c);
        pthread_mutex_lock(&d->mu);
        if (bad) chunk_free(c);   /* its pipe may still hold bytes */
        else chunk_put(d, c);
        pthread_mutex_unlock(&d->mu);
        if (bad) {   /* the peer is gone: stop reading this direction too */
            shutdown(d->from, SHUT_RD);
            pthread_mutex_lock(&d->mu);
            chunks_free(d->head);
            d->head = NULL;
            d->tail = NULL;
            d->queued = 0;
            d->eof = 1;
            pthread_cond_broadcast(&d->cv);
            pthread_mutex_unlock(&d->mu);
            return NULL;
        }
    }
}

static void dir_init(pipe_dir *d, int from, int to) {
    memset(d, 0, sizeof *d);
    d->from = from;
    d->to = to;
    pthread_mutex_init(&d->mu, NULL);
    pthread_cond_init(&d->cv, NULL);
}

typedef struct session {
    int client;
    int port;
} session;

/* Dial ip:port inside the servers' namespace (this thread moves there). */
static int dial(int port) {
    if (setns(target_ns_fd, CLONE_NEWNET) != 0) return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = ip};
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

static void *session_main(void *arg) {
    session *s = arg;
    int one = 1, server = dial(s->port);
    if (server >= 0) {
        setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        setsockopt(s->client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        pipe_dir up, down;
        dir_init(&up, s->client, server);
        dir_init(&down, server, s->client);
        pthread_t t[4];
        pthread_create(&t[0], NULL, reader, &up);
        pthread_create(&t[1], NULL, writer, &up);
        pthread_create(&t[2], NULL, reader, &down);
        pthread_create(&t[3], NULL, writer, &down);
        for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
        chunks_free(up.spare);
        chunks_free(down.spare);
        close(server);
    }
    close(s->client);
    free(s);
    return NULL;
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port), .sin_addr = ip};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 128) != 0) {
        fprintf(stderr, "bench_relay: listen on port %d: %s\n", port, strerror(errno));
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: bench_relay DELAY_US NETNS_PATH IP PORT...\n");
        return 2;
    }
    long us = atol(argv[1]);
    int nports = argc - 4;
    if (us < 0 || us > 1000000 || nports > MAX_PORTS || inet_pton(AF_INET, argv[3], &ip) != 1) {
        fprintf(stderr, "bench_relay: bad delay, address or too many ports\n");
        return 2;
    }
    delay_ns = (uint64_t)us * 1000;
    if ((target_ns_fd = open(argv[2], O_RDONLY | O_CLOEXEC)) < 0) {
        fprintf(stderr, "bench_relay: %s: %s\n", argv[2], strerror(errno));
        return 1;
    }
    signal(SIGPIPE, SIG_IGN);
    /* Two descriptors per chunk in flight: as many as the system allows. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
    struct pollfd pfd[MAX_PORTS];
    int port[MAX_PORTS];
    for (int i = 0; i < nports; i++) {
        port[i] = atoi(argv[4 + i]);
        pfd[i] = (struct pollfd){.fd = listen_on(port[i]), .events = POLLIN};
    }
    fprintf(stderr, "bench_relay: %d ports on %s, %ld us each way\n", nports, argv[3], us);
    for (;;) {
        if (poll(pfd, (nfds_t)nports, -1) < 0 && errno != EINTR) return 1;
        for (int i = 0; i < nports; i++) {
            if (!(pfd[i].revents & POLLIN)) continue;
            int c = accept4(pfd[i].fd, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0) continue;
            session *s = malloc(sizeof *s);
            pthread_t t;
            if (!s) {
                close(c);
                continue;
            }
            *s = (session){c, port[i]};
            if (pthread_create(&t, NULL, session_main, s) != 0) {
                close(c);
                free(s);
                continue;
            }
            pthread_detach(t);
        }
    }
}
