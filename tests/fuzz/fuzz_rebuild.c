/* fuzz_rebuild - the master's re-creation of its table from node reports
 * (src/master/rebuild.c, fed by MOON.REPORT): arbitrary extent claims of
 * three registered nodes, 16 input bytes each. Whatever is accepted must
 * form whole replicas of COMPLETE objects on disjoint nodes; the same
 * reports a second time add nothing (every key exists, every range is
 * claimed), whatever order the first rebuild visited keys in.
 * An input that starts with "PK" is instead a packed MOON.REPORT blob
 * (proto/report.h), decoded until its first malformed record, with the
 * records dealt to the nodes in turn. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/le.h"
#include "master/meta.h"
#include "proto/report.h"

#define NODES 3
#define KEYS 8
#define REC 16
#define MAX_RECS 256

static const char *const keys[KEYS] = {"a", "b", "c", "d", "e", "f", "g", "h"};

static master_meta *meta_with_nodes(void) {
    mm_config cfg;
    mm_config_defaults(&cfg);
    master_meta *m = mm_create(&cfg);
    const char *addr[1] = {"127.0.0.1:1"};
    for (int i = 0; i < NODES; i++) {
        uint32_t id;
        char err[256];
        if (mm_node_register(m, 1 << 20, addr, 1, 1000, &id, err, sizeof err) != PROTO_OK) abort();
    }
    return m;
}

static void check_object(master_meta *m, const void *key, size_t keylen) {
    object *o = mm_find(m, key, keylen);
    if (!o) return;
    if (o->state != OBJ_COMPLETE || o->nreplicas == 0) abort();
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t r = 0; r < o->nreplicas; r++) {
        uint64_t sum = 0;
        for (uint32_t e = 0; e < reps[r].nextents; e++) {
            sum += reps[r].extents[e].length;
            /* no node holds parts of two replicas */
            for (uint32_t q = 0; q < r; q++)
                for (uint32_t f = 0; f < reps[q].nextents; f++)
                    if (reps[q].extents[f].node == reps[r].extents[e].node) abort();
        }
        if (sum != o->size) abort();
    }
}

static void check_objects(master_meta *m, const mm_report *rep, size_t n) {
    for (int k = 0; k < KEYS; k++) check_object(m, keys[k], 1);
    for (size_t i = 0; i < n; i++) check_object(m, rep[i].key, rep[i].keylen);
}

/* Records of the packed blob [data, data+size), up to MAX_RECS. */
static size_t decode_packed(const uint8_t *data, size_t size, mm_report *rep) {
    const uint8_t *p = data, *end = data + size;
    proto_report_rec r;
    size_t n = 0;
    while (n < MAX_RECS && proto_report_next(&p, end, &r) == 0) {
        if (p > end || r.keylen == 0 || r.keylen > PROTO_MAX_KEY_LEN) abort();
        rep[n] = (mm_report){.node = (uint32_t)(n % (NODES + 2)), .key = r.key, .keylen = (uint32_t)r.keylen,
                             .size = r.size, .crc = r.crc, .want = r.want, .obj_off = r.obj_off,
                             .seg_off = r.seg_off, .length = r.length,
                             /* as the master keeps them: right after the key */
                             .slices = r.slices.count ? (const uint8_t *)r.key + r.keylen : NULL};
        n++;
    }
    return n;
}

static size_t decode_records(const uint8_t *data, size_t size, mm_report *rep) {
    size_t n = size / REC;
    if (n > MAX_RECS) n = MAX_RECS;
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = data + i * REC;
        /* node 0 and 4 are never registered: they must be refused */
        rep[i] = (mm_report){.node = p[0] % (NODES + 2), .key = keys[p[1] % KEYS], .keylen = (p[1] & 0x80) ? 0 : 1,
                             .size = le_get16(p + 2), .crc = p[4], .want = p[13] % 10, .obj_off = le_get16(p + 5),
                             .seg_off = le_get32(p + 7) & 0x1fffff, .length = le_get16(p + 11)};
    }
    return n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    mm_report *rep = calloc(MAX_RECS, sizeof *rep);
    size_t n = size >= 2 && memcmp(data, "PK", 2) == 0 ? decode_packed(data + 2, size - 2, rep)
                                                       : decode_records(data, size, rep);
    master_meta *m = meta_with_nodes();
    mm_rebuild_stats st, again;
    mm_rebuild(m, rep, n, 2000, &st, NULL, NULL);
    if (st.extents + st.extents_rejected != n || st.replicas < st.objects) abort();
    check_objects(m, rep, n);
    mm_rebuild(m, rep, n, 2000, &again, NULL, NULL);
    if (again.objects != 0 || again.extents != 0) abort();
    check_objects(m, rep, n);
    mm_destroy(m);
    free(rep);
    return 0;
}
