/* backend/wire.h - data-plane framing, shared by every client and server
 * side that speaks it (TCP transport and server, shm cap verification).
 *
 * Request  (TE_WIRE_REQ_LEN = 96 bytes, little-endian), then len payload
 * bytes for a write:
 *   0 magic u32 "MKVD" | 4 version u16 | 6 op u16 | 8 cookie u64 |
 *   16 remote_off u64 | 24 len u64 | 32 cap[TE_CAP_WIRE_LEN]
 * Response (TE_WIRE_RESP_LEN = 24 bytes), then len payload bytes for a
 * successful read:
 *   0 cookie u64 | 8 status i32 | 12 reserved u32 (0) | 16 len u64
 * A server answers one connection's requests in order. */
#ifndef MKV_WIRE_H
#define MKV_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/cap.h"
#include "backend/transport.h"

#define TE_WIRE_MAGIC    0x44564b4du   /* "MKVD" */
#define TE_WIRE_VERSION  1
#define TE_WIRE_REQ_LEN  (32 + TE_CAP_WIRE_LEN)
#define TE_WIRE_RESP_LEN 24
/* Largest single request: bounds what a peer can make us move at once. */
#define TE_WIRE_MAX_LEN  (1ULL << 30)

typedef struct te_wire_req {
    te_op op;
    uint64_t cookie;
    uint64_t remote_off;
    uint64_t len;
    uint8_t cap[TE_CAP_WIRE_LEN];   /* undecoded: the server decides */
} te_wire_req;

typedef struct te_wire_resp {
    uint64_t cookie;
    int32_t status;
    uint64_t len;
} te_wire_resp;

void te_wire_req_encode(const te_wire_req *r, uint8_t out[TE_WIRE_REQ_LEN]);
/* 0, or -1 when the framing is broken (magic, version, op, len above
 * TE_WIRE_MAX_LEN): the stream cannot be trusted and must be dropped. */
int te_wire_req_decode(te_wire_req *r, const uint8_t in[TE_WIRE_REQ_LEN]);
void te_wire_resp_encode(const te_wire_resp *r, uint8_t out[TE_WIRE_RESP_LEN]);
/* 0, or -1 for an unknown status, non-zero reserved or len too large. */
int te_wire_resp_decode(te_wire_resp *r, const uint8_t in[TE_WIRE_RESP_LEN]);

#endif
