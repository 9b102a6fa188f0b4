/* backend/wire.c - see wire.h. */
#include "backend/wire.h"

#include <string.h>

#include "backend/le.h"

void te_wire_req_encode(const te_wire_req *r, uint8_t out[TE_WIRE_REQ_LEN]) {
    le_put32(out + 0, TE_WIRE_MAGIC);
    le_put16(out + 4, TE_WIRE_VERSION);
    le_put16(out + 6, (uint16_t)r->op);
    le_put64(out + 8, r->cookie);
    le_put64(out + 16, r->remote_off);
    le_put64(out + 24, r->len);
    memcpy(out + 32, r->cap, TE_CAP_WIRE_LEN);
}

int te_wire_req_decode(te_wire_req *r, const uint8_t in[TE_WIRE_REQ_LEN]) {
    uint16_t op = le_get16(in + 6);
    if (le_get32(in) != TE_WIRE_MAGIC || le_get16(in + 4) != TE_WIRE_VERSION) return -1;
    if (op != TE_READ && op != TE_WRITE && op != TE_READ_DISK) return -1;
    r->op = (te_op)op;
    r->cookie = le_get64(in + 8);
    r->remote_off = le_get64(in + 16);
    r->len = le_get64(in + 24);
    if (r->len > TE_WIRE_MAX_LEN) return -1;
    memcpy(r->cap, in + 32, TE_CAP_WIRE_LEN);
    return 0;
}

void te_wire_resp_encode(const te_wire_resp *r, uint8_t out[TE_WIRE_RESP_LEN]) {
    le_put64(out + 0, r->cookie);
    le_put32(out + 8, (uint32_t)r->status);
    le_put32(out + 12, 0);
    le_put64(out + 16, r->len);
}

int te_wire_resp_decode(te_wire_resp *r, const uint8_t in[TE_WIRE_RESP_LEN]) {
    r->cookie = le_get64(in + 0);
    r->status = (int32_t)le_get32(in + 8);
    r->len = le_get64(in + 16);
    if (le_get32(in + 12) != 0 || r->len > TE_WIRE_MAX_LEN) return -1;
    if (r->status > TE_OK || r->status < TE_EINVAL) return -1;
    if (r->status != TE_OK && r->len != 0) return -1;
    return 0;
}
