/* proto/register.c - see register.h. */
#include "proto/register.h"

#include <stddef.h>
#include <string.h>

#include "core/siphash.h"
#include "core/util.h"

/* Domain separation: the register key is not the secret itself. */
static const uint8_t reg_domain[16] = "moonkv.register";

void proto_reg_key(const char *secret, uint8_t out[PROTO_REG_KEY_LEN]) {
    siphash24_128(secret, strlen(secret), reg_domain, out);
}

void proto_reg_proof(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                     const uint8_t nonce[PROTO_NONCE_LEN], uint8_t out[PROTO_PROOF_LEN]) {
    siphash24_128(nonce, PROTO_NONCE_LEN, reg_key, out);
}

int proto_reg_proof_ok(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                       const uint8_t nonce[PROTO_NONCE_LEN], const char *hex, size_t len) {
    uint8_t got[PROTO_PROOF_LEN], want[PROTO_PROOF_LEN];
    if (hex_decode(hex, len, got, sizeof got) != 0) return 0;
    proto_reg_proof(reg_key, nonce, want);
    uint8_t d = 0;
    for (size_t i = 0; i < sizeof got; i++) d |= (uint8_t)(got[i] ^ want[i]);
    return d == 0;
}
