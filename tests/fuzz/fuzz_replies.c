/* fuzz_replies - the MOON.* replies of proto/replies.c and the array
 * forms of PUTSTART and GET (proto/replicas.c) as a peer's
 * bytes, read as the wire reads them (proto_reply_read, bounded): a
 * reply is never taken from a cut, what it took lies inside the input,
 * and no decoder crashes, reads out of bounds or accepts a value outside
 * its bounds, whatever shape the reply has. Input: RESP bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/limits.h"
#include "proto/register.h"
#include "proto/replicas.h"
#include "proto/replies.h"

/* Every replica of p covers exactly size bytes with extents of its own. */
static void check_cover(const proto_placed *p, uint64_t size) {
    if (p->nreplicas < 1 || p->nreplicas > PROTO_MAX_REPLICAS) abort();
    for (uint32_t i = 0; i < p->nreplicas; i++) {
        uint64_t sum = 0;
        for (uint32_t k = 0; k < p->next[i]; k++) {
            if (p->ext[i][k].length == 0 || sum + p->ext[i][k].length < sum) abort();
            sum += p->ext[i][k].length;
        }
        if (sum != size) abort();
    }
}

static void decode_placements(const redisReply *r) {
    proto_extbuf buf = {0};
    proto_placed p;
    static const uint64_t sizes[] = {1, 100, 4096, 1 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        if (proto_dec_replicas(r, sizes[i], (i & 1) ? TE_CAP_READ : TE_CAP_WRITE, &buf, &p) == 0)
            check_cover(&p, sizes[i]);
    proto_location loc;
    if (proto_dec_location(r, &buf, &loc) == 1) {
        check_cover(&loc.reps, loc.size);
        if (loc.slices.count > PROTO_MAX_SLICES) abort();
        proto_slices_free(&loc.slices);
    }
    proto_extbuf_free(&buf);
}

static void decode_all(const redisReply *r) {
    decode_placements(r);
    long long v;
    if (proto_dec_int(r, 0, PROTO_MAX_BATCH, &v) == 0 && (v < 0 || v > PROTO_MAX_BATCH)) abort();
    int flags[8];
    for (size_t n = 0; n <= 8; n++)
        if (proto_dec_flags(r, n, flags) == 0)
            for (size_t i = 0; i < n; i++)
                if (flags[i] != 0 && flags[i] != 1) abort();
    for (size_t n = 0; n <= 8; n++)   /* MOON.MREMOVE: an error element only where the reply has one */
        if (proto_dec_removed(r, n, flags) == 0)
            for (size_t i = 0; i < n; i++)
                if (flags[i] < -1 || flags[i] > 1 || (flags[i] == -1) != (r->element[i]->type == REDIS_REPLY_ERROR))
                    abort();
    (void)proto_dec_ok(r);
    const uint8_t *nonce = proto_dec_nonce(r);
    if (nonce && r->len != PROTO_NONCE_LEN) abort();
    uint64_t next;
    const redisReply *keys;
    if (proto_dec_scan(r, &next, &keys) == 0)
        for (size_t i = 0; i < keys->elements; i++)
            if (keys->element[i]->len == 0 || keys->element[i]->len > PROTO_MAX_KEY_LEN) abort();
    uint64_t size;
    uint32_t crc;
    int got = proto_dec_object(r, &size, &crc);
    if (got == 1 && size > INT64_MAX) abort();
    uint64_t acked;
    const uint8_t *blob;
    size_t len;
    if (proto_dec_holdings(r, &acked, &blob, &len) == 0 && (acked > INT64_MAX || blob != (const uint8_t *)r->element[1]->str))
        abort();
    const redisReply *ts = proto_holdings_tasks(r);   /* TASKS: only ever an array in its third place */
    if (ts && (ts->type != REDIS_REPLY_ARRAY || r->elements < 3 || r->elements > 4 || ts != r->element[2] ||
               proto_dec_holdings(r, &acked, &blob, &len) != 0))
        abort();
    if (proto_holdings_ask_chunks(r) && !ts) abort();
    proto_registered reg;
    if (proto_dec_registered(r, &reg) == 0 &&
        (reg.id == 0 || reg.heartbeat_ms < 1 || reg.term == 0 || reg.reconcile < 0 || reg.reconcile > PROTO_REG_RECONCILE))
        abort();
    proto_topo_node t;
    if (proto_dec_topo_node(r, &t) == 0) {
        if (t.id == 0 || t.id > PROTO_MAX_NODES || t.naddrs < 0 || t.naddrs > TE_MAX_PATHS || t.state > PROTO_NODE_DEAD)
            abort();
        for (int i = 0; i < t.naddrs; i++)
            if (t.addrlen[i] == 0 || t.addrlen[i] >= TE_ADDR_LEN || t.addrs[i][t.addrlen[i]] != '\0') abort();
    }
    if ((r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS) && strlen(r->str) == r->len) {
        proto_node_line nl;
        if (proto_dec_node_line(r->str, &nl) == 0 && strlen(nl.state) >= sizeof nl.state) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    redisReply *r = NULL;
    size_t used = 0;
    int rc = proto_reply_read(data, size, &r, &used);
    if (rc == PROTO_REPLY_WHOLE) {
        if (!r || used == 0 || used > size) abort();
        /* the same bytes cut just before the reply's end are no reply */
        redisReply *cut = NULL;
        if (proto_reply_read(data, used - 1, &cut, NULL) == PROTO_REPLY_WHOLE) abort();
        if (cut) freeReplyObject(cut);
        decode_all(r);
        for (size_t i = 0; r->type == REDIS_REPLY_ARRAY && i < r->elements && i < 8; i++) decode_all(r->element[i]);
    } else if (r) {
        abort();
    }
    if (r) freeReplyObject(r);
    return 0;
}
