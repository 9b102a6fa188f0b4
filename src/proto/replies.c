/* proto/replies.c - see replies.h. */
#include "proto/replies.h"

#include <hiredis/read.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/util.h"
#include "proto/limits.h"
#include "proto/register.h"
#include "proto/reply_bound.h"

int proto_reply_read(const void *buf, size_t len, redisReply **out, size_t *used) {
    *out = NULL;
    redisReader *rd = redisReaderCreate();
    if (!rd) return PROTO_REPLY_BAD;
    proto_reader_bound(rd);
    void *reply = NULL;
    int rc = PROTO_REPLY_BAD;
    if (redisReaderFeed(rd, buf, len) == REDIS_OK && redisReaderGetReply(rd, &reply) == REDIS_OK) {
        rc = reply ? PROTO_REPLY_WHOLE : PROTO_REPLY_INCOMPLETE;
        if (used) *used = reply ? len - (rd->len - rd->pos) : 0;   /* what the reader has not taken */
    }
    redisReaderFree(rd);
    *out = reply;
    return rc;
}

static int int_in(const redisReply *r, long long min, long long max) {
    return r && r->type == REDIS_REPLY_INTEGER && r->integer >= min && r->integer <= max;
}

int proto_dec_int(const redisReply *r, long long min, long long max, long long *out) {
    if (!int_in(r, min, max)) return -1;
    *out = r->integer;
    return 0;
}

int proto_dec_flags(const redisReply *r, size_t n, int *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != n) return -1;
    for (size_t i = 0; i < n; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER) return -1;
    for (size_t i = 0; i < n; i++) out[i] = r->element[i]->integer != 0;
    return 0;
}

int proto_dec_removed(const redisReply *r, size_t n, int *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != n) return -1;
    for (size_t i = 0; i < n; i++)
        if (r->element[i]->type != REDIS_REPLY_INTEGER && r->element[i]->type != REDIS_REPLY_ERROR) return -1;
    for (size_t i = 0; i < n; i++)
        out[i] = r->element[i]->type == REDIS_REPLY_ERROR ? -1 : r->element[i]->integer != 0;
    return 0;
}

int proto_dec_ok(const redisReply *r) { return r && r->type == REDIS_REPLY_STATUS ? 0 : -1; }

const uint8_t *proto_dec_nonce(const redisReply *r) {
    return r && r->type == REDIS_REPLY_STRING && r->len == PROTO_NONCE_LEN ? (const uint8_t *)r->str : NULL;
}

/* A decimal u64 filling s[0..len) exactly. */
static int u64_of(const char *s, size_t len, uint64_t *out) {
    if (len == 0 || len > 20) return -1;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        uint64_t d = (uint64_t)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

int proto_dec_scan(const redisReply *r, uint64_t *next, const redisReply **keys) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 2) return -1;
    const redisReply *cur = r->element[0], *ks = r->element[1];
    if (cur->type != REDIS_REPLY_STRING || ks->type != REDIS_REPLY_ARRAY) return -1;
    for (size_t i = 0; i < ks->elements; i++) {
        const redisReply *k = ks->element[i];
        if (k->type != REDIS_REPLY_STRING || k->len == 0 || k->len > PROTO_MAX_KEY_LEN) return -1;
    }
    if (u64_of(cur->str, cur->len, next) != 0) return -1;
    *keys = ks;
    return 0;
}

/* k names the field: a bulk or status string equal to name. */
static int field_is(const redisReply *k, const char *name) {
    size_t n = strlen(name);
    return (k->type == REDIS_REPLY_STRING || k->type == REDIS_REPLY_STATUS) && k->len == n &&
           memcmp(k->str, name, n) == 0;
}

int proto_dec_object(const redisReply *r, uint64_t *size, uint32_t *crc) {
    if (!r) return -1;
    if (r->type == REDIS_REPLY_NIL) return 0;
    if (r->type != REDIS_REPLY_ARRAY || r->elements % 2) return -1;   /* RESP2: the map as a flat array */
    int complete = -1, have_size = 0, have_crc = 0;
    for (size_t i = 0; i < r->elements; i += 2) {
        const redisReply *k = r->element[i], *v = r->element[i + 1];
        if (field_is(k, "state") && (v->type == REDIS_REPLY_STRING || v->type == REDIS_REPLY_STATUS))
            complete = v->len == 8 && memcmp(v->str, "complete", 8) == 0;
        else if (field_is(k, "size") && int_in(v, 0, INT64_MAX))
            *size = (uint64_t)v->integer, have_size = 1;
        else if (field_is(k, "crc") && int_in(v, 0, UINT32_MAX))
            *crc = (uint32_t)v->integer, have_crc = 1;
    }
    if (complete < 0 || !have_size || !have_crc) return -1;
    return complete;
}

int proto_dec_holdings(const redisReply *r, uint64_t *acked, const uint8_t **blob, size_t *len) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 || r->elements > 4 ||
        !int_in(r->element[0], 0, INT64_MAX) || r->element[1]->type != REDIS_REPLY_STRING ||
        (r->elements >= 3 && r->element[2]->type != REDIS_REPLY_ARRAY) ||
        (r->elements == 4 && !int_in(r->element[3], 0, 1)))
        return -1;
    *acked = (uint64_t)r->element[0]->integer;
    *blob = (const uint8_t *)r->element[1]->str;
    *len = r->element[1]->len;
    return 0;
}

/* Only of a reply proto_dec_holdings takes: any other array with an
 * array third is no holdings reply. */
static int is_holdings(const redisReply *r) {
    uint64_t acked;
    const uint8_t *blob;
    size_t len;
    return proto_dec_holdings(r, &acked, &blob, &len) == 0;
}

const redisReply *proto_holdings_tasks(const redisReply *r) {
    return is_holdings(r) && r->elements >= 3 ? r->element[2] : NULL;
}

int proto_holdings_ask_chunks(const redisReply *r) {
    return is_holdings(r) && r->elements == 4 && r->element[3]->integer == 1;
}

int proto_dec_registered(const redisReply *r, proto_registered *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 5) return -1;
    redisReply **e = r->element;
    if (!int_in(e[0], 1, UINT32_MAX) || e[1]->type != REDIS_REPLY_STRING ||
        hex_decode(e[1]->str, e[1]->len, out->cap_key, sizeof out->cap_key) != 0 ||
        !int_in(e[2], 1, 3600 * 1000) || !int_in(e[3], 1, INT64_MAX) || !int_in(e[4], 0, PROTO_REG_RECONCILE))
        return -1;
    out->id = (uint32_t)e[0]->integer;
    out->heartbeat_ms = (int)e[2]->integer;
    out->term = (uint64_t)e[3]->integer;
    out->reconcile = (int)e[4]->integer;
    return 0;
}

static int state_of(const redisReply *r, proto_node_state *st) {
    static const char *const words[] = {"alive", "draining", "dead"};
    if (r->type != REDIS_REPLY_STRING && r->type != REDIS_REPLY_STATUS) return -1;
    for (int i = 0; i < 3; i++)
        if (r->len == strlen(words[i]) && memcmp(r->str, words[i], r->len) == 0) {
            *st = (proto_node_state)i;
            return 0;
        }
    return -1;
}

int proto_dec_topo_node(const redisReply *r, proto_topo_node *out) {
    if (!r || r->type != REDIS_REPLY_ARRAY || r->elements != 3 || !int_in(r->element[0], 1, PROTO_MAX_NODES))
        return -1;
    const redisReply *addrs = r->element[2];
    if (state_of(r->element[1], &out->state) != 0 || addrs->type != REDIS_REPLY_ARRAY ||
        addrs->elements > TE_MAX_PATHS)
        return -1;
    for (size_t i = 0; i < addrs->elements; i++) {
        const redisReply *a = addrs->element[i];
        if ((a->type != REDIS_REPLY_STRING && a->type != REDIS_REPLY_STATUS) || a->len == 0 || a->len >= TE_ADDR_LEN)
            return -1;
        out->addrs[i] = a->str;
        out->addrlen[i] = a->len;
    }
    out->naddrs = (int)addrs->elements;
    out->id = (uint32_t)r->element[0]->integer;
    return 0;
}

int proto_dec_node_line(const char *line, proto_node_line *out) {
    unsigned id;
    unsigned long long seg, used;
    if (sscanf(line, "%u %*s %15s %llu %llu", &id, out->state, &seg, &used) != 4) return -1;
    out->id = id;
    out->segment_size = seg;
    out->used = used;
    return 0;
}
