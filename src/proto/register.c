/* proto/register.c - see register.h. */
#include "proto/register.h"

#include <stddef.h>
#include <string.h>

#include "core/siphash.h"
#include "core/util.h"

/* Domain separation: the register key is not the secret itself. */
static const uint8_t reg_domain[16] = "moonkv.register";
/* What a member proof hashes before the nonce (a register proof hashes
 * the nonce alone). */
static const uint8_t member_label[16] = "moonkv.member";

void proto_reg_key(const char *secret, uint8_t out[PROTO_REG_KEY_LEN]) {
    siphash24_128(secret, strlen(secret), reg_domain, out);
}

void proto_reg_proof(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                     const uint8_t nonce[PROTO_NONCE_LEN], uint8_t out[PROTO_PROOF_LEN]) {
    siphash24_128(nonce, PROTO_NONCE_LEN, reg_key, out);
}

void proto_member_proof(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                        const uint8_t nonce[PROTO_NONCE_LEN], uint8_t out[PROTO_PROOF_LEN]) {
    uint8_t msg[sizeof member_label + PROTO_NONCE_LEN];
    memcpy(msg, member_label, sizeof member_label);
    memcpy(msg + sizeof member_label, nonce, PROTO_NONCE_LEN);
    siphash24_128(msg, sizeof msg, reg_key, out);
}

/* 1 if hex decodes to want, compared in constant time. */
static int proof_matches(const uint8_t want[PROTO_PROOF_LEN], const char *hex, size_t len) {
    uint8_t got[PROTO_PROOF_LEN];
    if (hex_decode(hex, len, got, sizeof got) != 0) return 0;
    uint8_t d = 0;
    for (size_t i = 0; i < sizeof got; i++) d |= (uint8_t)(got[i] ^ want[i]);
    return d == 0;
}

int proto_reg_proof_ok(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                       const uint8_t nonce[PROTO_NONCE_LEN], const char *hex, size_t len) {
    uint8_t want[PROTO_PROOF_LEN];
    proto_reg_proof(reg_key, nonce, want);
    return proof_matches(want, hex, len);
}

int proto_member_proof_ok(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                          const uint8_t nonce[PROTO_NONCE_LEN], const char *hex, size_t len) {
    uint8_t want[PROTO_PROOF_LEN];
    proto_member_proof(reg_key, nonce, want);
    return proof_matches(want, hex, len);
}

int proto_member_proof_hex(const char *secret, const void *nonce, size_t len,
                           char out[2 * PROTO_PROOF_LEN + 1]) {
    if (!nonce || len != PROTO_NONCE_LEN) return -1;
    uint8_t key[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    proto_reg_key(secret ? secret : "", key);
    proto_member_proof(key, nonce, proof);
    hex_encode(proof, sizeof proof, out);
    return 0;
}
