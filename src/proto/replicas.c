/* proto/replicas.c - see replicas.h. */
#include "proto/replicas.h"

#include <string.h>

#include "proto/extents.h"

int proto_dec_replicas(const redisReply *r, uint64_t size, uint32_t rights, proto_extbuf *buf,
                       proto_placed *out) {
    memset(out, 0, sizeof *out);
    if (r->type != REDIS_REPLY_ARRAY || r->elements == 0 || r->elements > PROTO_MAX_REPLICAS) return -1;
    size_t total = 0;   /* bounded before the sum: at most 8 x PROTO_MAX_EXTENTS */
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *e = r->element[i];
        if (e->type != REDIS_REPLY_ARRAY || e->elements == 0 || e->elements > PROTO_MAX_EXTENTS) return -1;
        total += e->elements;
    }
    te_extent *ext = proto_extbuf_room(buf, total), *end = ext + total;
    for (size_t i = 0; i < r->elements; i++) {
        if (proto_extents_decode_into(r->element[i], PROTO_EXT_REMOTE, size, rights, ext, (uint32_t)(end - ext),
                                      &out->next[i]) != 0) {
            memset(out, 0, sizeof *out);
            return -1;
        }
        out->ext[i] = ext;
        ext += out->next[i];
        out->nextents += out->next[i];
    }
    out->nreplicas = (uint32_t)r->elements;
    return 0;
}

int proto_dec_location(const redisReply *r, proto_extbuf *buf, proto_location *out) {
    memset(out, 0, sizeof *out);
    if (r->type == REDIS_REPLY_NIL) return 0;
    uint64_t size, crc;
    if (r->type != REDIS_REPLY_ARRAY || (r->elements != 3 && r->elements != 5) ||
        proto_int_in(r->element[0], 1, INT64_MAX, &size) != 0 ||
        proto_int_in(r->element[1], 0, UINT32_MAX, &crc) != 0 ||
        proto_dec_replicas(r->element[2], size, TE_CAP_READ, buf, &out->reps) != 0)
        return -1;
    out->size = size;
    out->crc = (uint32_t)crc;
    if (r->elements == 5 && proto_slices_decode(r->element[3], r->element[4], size, out->crc, &out->slices) != 0) {
        memset(out, 0, sizeof *out);
        return -1;
    }
    return 1;
}
