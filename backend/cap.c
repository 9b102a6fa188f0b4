/* backend/cap.c - capability signing, checking and wire encoding.
 *
 * Wire layout (TE_CAP_WIRE_LEN = 64 bytes, little-endian):
 *   0 node_id u32 | 4 rights u32 | 8 offset u64 | 16 length u64 |
 *   24 expiry_ms u64 | 32 term u64 | 40 issued_us u64 | 48 mac[16]
 * The MAC is SipHash-2-4-128 over bytes [0, 48): the term is signed, so
 * a holder cannot move a grant into another master's term. */
#include "backend/cap.h"

#include <string.h>

#include "backend/le.h"
#include "core/siphash.h"

#define CAP_MAC_OFF 48

static void cap_encode_body(const te_cap *cap, uint8_t out[TE_CAP_WIRE_LEN]) {
    memset(out, 0, TE_CAP_WIRE_LEN);
    le_put32(out + 0, cap->node_id);
    le_put32(out + 4, cap->rights);
    le_put64(out + 8, cap->offset);
    le_put64(out + 16, cap->length);
    le_put64(out + 24, cap->expiry_ms);
    le_put64(out + 32, cap->term);
    le_put64(out + 40, cap->issued_us);
}

static void cap_mac(const te_cap *cap, const uint8_t key[TE_CAP_KEY_LEN], uint8_t mac[TE_MAC_LEN]) {
    uint8_t w[TE_CAP_WIRE_LEN];
    cap_encode_body(cap, w);
    siphash24_128(w, CAP_MAC_OFF, key, mac);
}

void te_cap_sign(te_cap *cap, const uint8_t key[TE_CAP_KEY_LEN]) {
    cap_mac(cap, key, cap->mac);
}

/* Constant time, so a forger learns nothing from response timing. */
static int mac_equal(const uint8_t *a, const uint8_t *b) {
    uint8_t d = 0;
    for (int i = 0; i < TE_MAC_LEN; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

int te_cap_check_nokey(const te_cap *cap, uint32_t node_id, te_op op, uint64_t off,
                       uint64_t len, uint64_t now_ms) {
    uint32_t need = op == TE_WRITE ? TE_CAP_WRITE : op == TE_READ_DISK ? TE_CAP_DISK : TE_CAP_READ;
    /* a disk cap names a record, not segment bytes: it never opens the segment */
    if (cap->node_id != node_id || !(cap->rights & need) || now_ms >= cap->expiry_ms ||
        (op != TE_READ_DISK && (cap->rights & TE_CAP_DISK)))
        return TE_EAUTH;
    /* [off, off+len) inside [cap->offset, cap->offset+cap->length),
     * written so that no sum can wrap. */
    if (off < cap->offset || len > cap->length || off - cap->offset > cap->length - len)
        return TE_ERANGE;
    return TE_OK;
}

int te_cap_check(const te_cap *cap, const uint8_t key[TE_CAP_KEY_LEN], uint64_t term,
                 uint32_t node_id, te_op op, uint64_t off, uint64_t len, uint64_t now_ms) {
    uint8_t mac[TE_MAC_LEN];
    cap_mac(cap, key, mac);
    if (!mac_equal(mac, cap->mac) || cap->term != term) return TE_EAUTH;
    return te_cap_check_nokey(cap, node_id, op, off, len, now_ms);
}

/* Public: the cap's MAC, not this hash, is what a reader cannot forge;
 * the hash only has to tell a node's records apart. */
static const uint8_t disk_tag_key[SIPHASH_KEY_LEN] = "moonkv.diskread";

uint64_t te_cap_disk_tag(const void *key, size_t keylen) {
    uint64_t h = siphash24(key, keylen, disk_tag_key);
    return h ? h : 1;   /* 0: no record */
}

void te_cap_encode(const te_cap *cap, uint8_t out[TE_CAP_WIRE_LEN]) {
    cap_encode_body(cap, out);
    memcpy(out + CAP_MAC_OFF, cap->mac, TE_MAC_LEN);
}

int te_cap_decode(te_cap *cap, const uint8_t *in, size_t len) {
    if (!in || len < TE_CAP_WIRE_LEN) return -1;
    cap->node_id = le_get32(in + 0);
    cap->rights = le_get32(in + 4);
    cap->offset = le_get64(in + 8);
    cap->length = le_get64(in + 16);
    cap->expiry_ms = le_get64(in + 24);
    cap->term = le_get64(in + 32);
    cap->issued_us = le_get64(in + 40);
    memcpy(cap->mac, in + CAP_MAC_OFF, TE_MAC_LEN);
    return 0;
}
