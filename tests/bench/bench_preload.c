/* bench_preload.c - fills a RESP server with the keys redis-benchmark's
 * `-r COUNT` GETs will ask for: key:000000000000 .. key:<COUNT-1>, 12
 * digits as redis-benchmark writes __rand_int__, each SIZE bytes.
 *
 *   bench_preload HOST:PORT COUNT SIZE
 *
 * Pipelined in windows (at most 256 commands or 64 MiB in flight).
 * Prints RESULT preload.errors N count (-EXISTS and others) and exits 1
 * only when the server cannot be reached. */
#include <hiredis/hiredis.h>

#include "bench.h"

#define WINDOW_CMDS  256
#define WINDOW_BYTES (64u << 20)

/* Reads n replies; returns how many were errors, or -1 on a lost link.
 * The first error of the whole run is shown (seen_error). */
static long drain(redisContext *rc, size_t n, int *seen_error) {
    long errors = 0;
    for (size_t i = 0; i < n; i++) {
        void *p;
        if (redisGetReply(rc, &p) != REDIS_OK) return -1;
        redisReply *r = p;
        if (r->type == REDIS_REPLY_ERROR) {
            if (!*seen_error) fprintf(stderr, "preload: first error: %s\n", r->str);
            *seen_error = 1;
            errors++;
        }
        freeReplyObject(r);
    }
    return errors;
}

int main(int argc, char **argv) {
    char host[256];
    int port;
    long count = argc == 4 ? atol(argv[2]) : 0;
    if (argc != 4 || parse_hostport(argv[1], host, sizeof host, &port) != 0 || count < 1 ||
        count > 100000000) {
        fprintf(stderr, "usage: bench_preload HOST:PORT COUNT SIZE (COUNT 1..1e8)\n");
        return 2;
    }
    size_t size = bench_size_arg(argv[3]);
    struct timeval tv = {30, 0};
    redisContext *rc = redisConnectWithTimeout(host, port, tv);
    if (!rc || rc->err) {
        fprintf(stderr, "preload: cannot connect to %s: %s\n", argv[1], rc ? rc->errstr : "no memory");
        if (rc) redisFree(rc);
        return 1;
    }
    redisSetTimeout(rc, tv);
    unsigned char *val = bench_buffer(size, 8);
    long errors = 0;
    int seen_error = 0;
    size_t pending = 0, pending_bytes = 0;
    for (long i = 0; i < count && errors >= 0; i++) {
        char key[32];
        int n = snprintf(key, sizeof key, "key:%012ld", i);
        redisAppendCommand(rc, "SET %b %b", key, (size_t)n, val, size);
        pending++;
        pending_bytes += size;
        if (pending == WINDOW_CMDS || pending_bytes >= WINDOW_BYTES || i + 1 == count) {
            long e = drain(rc, pending, &seen_error);
            errors = e < 0 ? -1 : errors + e;
            pending = pending_bytes = 0;
        }
    }
    free(val);
    if (errors < 0) {
        fprintf(stderr, "preload: connection lost: %s\n", rc->errstr);
        redisFree(rc);
        return 1;
    }
    redisFree(rc);
    bench_result("preload.errors", (double)errors, "count");
    return 0;
}
