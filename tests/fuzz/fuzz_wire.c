/* fuzz_wire - data-plane framing (backend/wire.c): any 96-byte request
 * header and 24-byte response header either decode to a frame that
 * encodes back to the same bytes' meaning, or are refused; nothing a
 * peer sends decodes to a length above TE_WIRE_MAX_LEN. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/wire.h"

static void check_req(const uint8_t in[TE_WIRE_REQ_LEN]) {
    te_wire_req r, again;
    if (te_wire_req_decode(&r, in) != 0) return;
    if (r.len > TE_WIRE_MAX_LEN) abort();
    uint8_t out[TE_WIRE_REQ_LEN];
    te_wire_req_encode(&r, out);
    if (te_wire_req_decode(&again, out) != 0) abort();
    if (again.op != r.op || again.cookie != r.cookie || again.remote_off != r.remote_off ||
        again.len != r.len || memcmp(again.cap, r.cap, sizeof r.cap) != 0)
        abort();
}

static void check_resp(const uint8_t in[TE_WIRE_RESP_LEN]) {
    te_wire_resp r, again;
    if (te_wire_resp_decode(&r, in) != 0) return;
    if (r.len > TE_WIRE_MAX_LEN) abort();
    uint8_t out[TE_WIRE_RESP_LEN];
    te_wire_resp_encode(&r, out);
    if (te_wire_resp_decode(&again, out) != 0) abort();
    if (again.cookie != r.cookie || again.status != r.status || again.len != r.len) abort();
    if (memcmp(out, in, TE_WIRE_RESP_LEN) != 0) abort();   /* one encoding per frame */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    uint8_t req[TE_WIRE_REQ_LEN] = {0}, resp[TE_WIRE_RESP_LEN] = {0};
    /* A stream of back-to-back headers, as a server reads them. */
    for (size_t pos = 0; pos < size; pos += TE_WIRE_REQ_LEN) {
        size_t n = size - pos < TE_WIRE_REQ_LEN ? size - pos : TE_WIRE_REQ_LEN;
        memset(req, 0, sizeof req);
        memcpy(req, data + pos, n);
        check_req(req);
        memcpy(resp, req, sizeof resp);
        check_resp(resp);
    }
    return 0;
}
