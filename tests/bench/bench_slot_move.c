/* bench_slot_move.c - what moving a slot's objects by their metadata
 * costs the two masters' tables (docs/SCALE.md "Moving a slot with its
 * objects"): records given away and adopted per second of CPU time.
 *
 *   bench_slot_move [COUNT]
 *
 * Two master tables in this process (master/migrate.h), the same two node
 * processes known to both (by their tokens, under other ids): COUNT
 * objects (64 B, replicas 1, 13-byte keys, default 10^6) put in the first,
 * all given away in passes over its table (move.give: objects per CPU
 * second), the records cut into the 4 MiB pieces MOON.SLOTEXPORT hands out
 * and adopted by the second (move.adopt). Only the tables' work: the
 * network between the masters and the loop's other work are not in it.
 * Output: bench.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "master/migrate.h"
#include "master/slot_move.h"

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static master_meta *table(void) {
    mm_config c;
    mm_config_defaults(&c);
    return mm_create(&c);
}

static int join(master_meta *m, uint64_t tok, int port) {
    char addr[32], err[PROTO_ERR_LEN];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *addrs[] = {addr};
    mm_node_claim cl = {0, tok, 0, 0, 0, 0};
    uint32_t id;
    mm_reg_kind kind;
    return mm_node_register_as(m, &cl, 64ULL << 30, addrs, 1, 0, &id, &kind, err, sizeof err) == PROTO_OK ? 0 : -1;
}

static int every(const object *o, void *ctx, int *dest) {
    (void)o, (void)ctx;
    *dest = 0;
    return 1;
}

int main(int argc, char **argv) {
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    master_meta *a = table(), *b = table();
    if (join(a, 0xA1, 1) || join(a, 0xA2, 2) || join(b, 0xB0, 3) || join(b, 0xA2, 2) || join(b, 0xA1, 1)) {
        bench_skip("move.give", "nodes did not register");
        return 1;
    }
    mm_item items[1000];
    char keys[1000][16];
    for (size_t done = 0; done < count;) {   /* batches, as MPUTSTART/MPUTEND */
        size_t n = count - done < 1000 ? count - done : 1000;
        for (size_t i = 0; i < n; i++) {
            snprintf(keys[i], sizeof keys[i], "k%012zu", done + i);
            items[i] = (mm_item){.key = keys[i], .keylen = 13, .size = 64, .crc = 7};
        }
        mm_put_start_batch(a, items, n, 1, 1);
        mm_put_end_batch(a, items, n, 1);
        done += n;
    }
    resp_buf out[MM_GIVE_DESTS];
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_init(&out[i]);
    mm_give_pass p = {0};
    double t0 = cpu_s();
    while (mm_give_step(a, &p, every, NULL, out, NULL)) {}
    double give = cpu_s() - t0;
    mm_adopt_stats st;
    uint64_t adopted = 0;
    t0 = cpu_s();
    for (size_t at = 0; at < out[0].len;) {
        size_t n = mm_give_cut((const uint8_t *)out[0].data + at, out[0].len - at, SLOT_MOVE_PULL_BYTES);
        if (mm_adopt(b, (const uint8_t *)out[0].data + at, n, 5000, 10, &st) != 0) break;
        adopted += st.objects;
        at += n;
    }
    double adopt = cpu_s() - t0;
    fprintf(stderr, "bench_slot_move: %zu objects, %llu given (%.3f s), %llu adopted (%.3f s), %zu bytes of records\n",
            count, (unsigned long long)p.given, give, (unsigned long long)adopted, adopt, out[0].len);
    if (p.given != count || adopted != count) {
        bench_skip("move.give", "given %llu, adopted %llu of %zu", (unsigned long long)p.given,
                   (unsigned long long)adopted, count);
        return 1;
    }
    bench_result("move.give", (double)count / give, "objects/cpu-s");
    bench_result("move.adopt", (double)count / adopt, "objects/cpu-s");
    bench_result("move.record_bytes", (double)out[0].len / (double)count, "B/object");
    for (int i = 0; i < MM_GIVE_DESTS; i++) resp_buf_free(&out[i]);
    mm_destroy(a);
    mm_destroy(b);
    return 0;
}
