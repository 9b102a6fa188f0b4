/* fuzz_cap - capability decoding and checking (backend/cap.c): a decoded
 * capability re-encodes to the same bytes, a forged one never passes
 * te_cap_check, one of another master term never does, and whatever
 * passes grants only a range inside itself
 * (the overflow-safe range check, tested with 128-bit arithmetic). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cap.h"
#include "backend/le.h"

static const uint8_t KEY[TE_CAP_KEY_LEN] = "fuzz-cap-key-016";

static void check_grant(const te_cap *cap, int rc, uint64_t off, uint64_t len) {
    if (rc != TE_OK) return;
    unsigned __int128 end = (unsigned __int128)off + len;
    unsigned __int128 cap_end = (unsigned __int128)cap->offset + cap->length;
    if (off < cap->offset || end > cap_end) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < TE_CAP_WIRE_LEN + 24) {
        te_cap c;
        (void)te_cap_decode(&c, data, size);   /* short input: refused, never read past */
        return 0;
    }
    te_cap cap;
    if (te_cap_decode(&cap, data, TE_CAP_WIRE_LEN) != 0) return 0;
    uint8_t out[TE_CAP_WIRE_LEN];
    te_cap_encode(&cap, out);
    if (memcmp(out, data, TE_CAP_WIRE_LEN) != 0) abort();

    const uint8_t *q = data + TE_CAP_WIRE_LEN;
    uint64_t off = le_get64(q), len = le_get64(q + 8), now = le_get64(q + 16);
    te_op op = (q[0] & 1) ? TE_READ : TE_WRITE;
    uint32_t node = cap.node_id ^ (q[1] & 1);

    /* As received: the fuzzer cannot know KEY, so the MAC is forged. */
    int rc = te_cap_check(&cap, KEY, cap.term, node, op, off, len, now);
    if (rc == TE_OK) abort();
    check_grant(&cap, te_cap_check_nokey(&cap, node, op, off, len, now), off, len);

    /* Genuinely signed: only the key-less checks decide. */
    te_cap_sign(&cap, KEY);
    rc = te_cap_check(&cap, KEY, cap.term, node, op, off, len, now);
    if (rc != te_cap_check_nokey(&cap, node, op, off, len, now)) abort();
    check_grant(&cap, rc, off, len);
    /* Of any other term (a deposed or restarted master's): refused. */
    if (te_cap_check(&cap, KEY, cap.term ^ (1 + (q[2] & 7)), node, op, off, len, now) == TE_OK) abort();
    return 0;
}
