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
 * through it. One thread per direction stamps each chunk as it arrives
 * and sends it DELAY_US after that stamp, reading on while earlier chunks
 * wait (it sleeps in ppoll until the first chunk is due or more bytes
 * come), so a stream is delayed, not slowed. A chunk is a pipe: the bytes
 * are spliced from one socket into it and from it into the other, so the
 * relay copies none of them. The relay still adds a hop of its own (two
 * more sockets, a thread's wake-up per chunk, a timer's lateness); the
 * bench measures a PING through it and trims the delay to that. Runs
 * until killed.
 *
 * (An earlier version ran a reader and a writer thread per direction,
 * handing chunks over under a lock: three wake-ups per chunk instead of
 * one or two, about 55 us of round trip of its own on this VM, and 20
 * threads on two cores under a batch.) */
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

/* One direction: from -> to, a queue of stamped chunks and the sent
 * ones (empty pipes) kept for reuse. Only its own thread touches it. */
typedef struct pipe_dir {
    int from, to;
    chunk *head, *tail, *spare;
    size_t queued;            /* chunks */
    int eof;                  /* from is done: send the rest, then shut down */
} pipe_dir;

static uint64_t delay_ns;
static int target_ns_fd = -1;
static struct in_addr ip;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void chunk_free(chunk *c) {
    close(c->p[0]);
    close(c->p[1]);
    free(c);
}

static void chunks_free(chunk *c) {
    while (c) {
        chunk *x = c;
        c = c->next;
        chunk_free(x);
    }
}

static chunk *chunk_get(pipe_dir *d) {
    chunk *c = d->spare;
    if (c) {
        d->spare = c->next;
        return c;
    }
    c = malloc(sizeof *c);
    if (c && pipe2(c->p, O_CLOEXEC) != 0) {
        free(c);
        return NULL;
    }
    if (c) (void)fcntl(c->p[1], F_SETPIPE_SZ, CHUNK);   /* else the default 64 KiB */
    return c;
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

/* Sends the chunks that are due. -1: the receiver is gone. */
static int send_due(pipe_dir *d) {
    while (d->head && d->head->due_ns <= now_ns()) {
        chunk *c = d->head;
        if (send_chunk(d->to, c) != 0) return -1;
        d->head = c->next;
        if (!d->head) d->tail = NULL;
        d->queued--;
        c->next = d->spare;
        d->spare = c;
    }
    return 0;
}

/* What is readable now, as one stamped chunk at the tail; sets eof when
 * the sender is done (or the read failed). */
static void read_chunk(pipe_dir *d) {
    chunk *c = chunk_get(d);
    ssize_t n = c ? splice(d->from, NULL, c->p[1], NULL, CHUNK, SPLICE_F_MOVE | SPLICE_F_NONBLOCK) : -1;
    if (n > 0) {
        c->due_ns = now_ns() + delay_ns;
        c->len = (size_t)n;
        c->next = NULL;
        if (d->tail) d->tail->next = c;
        else d->head = c;
        d->tail = c;
        d->queued++;
        return;
    }
    if (c) {   /* still empty */
        c->next = d->spare;
        d->spare = c;
    }
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) d->eof = 1;
}

/* Sleeps until the first chunk is due or from has bytes (when there is
 * room to queue them). */
static void wait_event(pipe_dir *d) {
    struct pollfd pfd = {.fd = d->from, .events = POLLIN};
    int reading = !d->eof && d->queued < QUEUE_CHUNKS;
    struct timespec ts, *tp = NULL;
    if (d->head) {
        uint64_t now = now_ns(), left = d->head->due_ns > now ? d->head->due_ns - now : 0;
        ts = (struct timespec){(time_t)(left / 1000000000ull), (long)(left % 1000000000ull)};
        tp = &ts;
    }
    if (ppoll(reading ? &pfd : NULL, reading ? 1 : 0, tp, NULL) > 0 && pfd.revents) read_chunk(d);
}

static void *pump(void *arg) {
    pipe_dir *d = arg;
    prctl(PR_SET_TIMERSLACK, 1UL);   /* wake on time, not 50 us late */
    for (;;) {
        if (send_due(d) != 0) {   /* the receiver is gone: so is the sender's use */
            shutdown(d->from, SHUT_RDWR);
            break;
        }
        if (d->eof && !d->head) {
            shutdown(d->to, SHUT_WR);
            break;
        }
        wait_event(d);
    }
    chunks_free(d->head);
    chunks_free(d->spare);
    return NULL;
}

static void dir_init(pipe_dir *d, int from, int to) {
    memset(d, 0, sizeof *d);
    d->from = from;
    d->to = to;
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
        pthread_t t;
        if (pthread_create(&t, NULL, pump, &up) == 0) {
            pump(&down);   /* this thread carries the other direction */
            pthread_join(t, NULL);
        }
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
