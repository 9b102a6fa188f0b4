/* proto/register.h - the proof a node registers with (MOON.CHALLENGE,
 * MOON.REGISTER).
 *
 * Both sides derive a register key from the cluster secret; the node
 * answers the master's nonce with SipHash-2-4-128 of it under that key,
 * so the secret itself never crosses the wire. */
#ifndef MKV_PROTO_REGISTER_H
#define MKV_PROTO_REGISTER_H

#include <stddef.h>
#include <stdint.h>

#include "proto/limits.h"

#define PROTO_REG_KEY_LEN 16
/* The last field of MOON.REGISTER's reply, what the node does with its
 * index: 0 keep, 1 report (a rebuild), 2 forget, and, only to a node
 * that registered with KEPT (its segment and index survived its restart),
 * 3: report it so the master keeps the replicas it proves (reconcile). */
#define PROTO_REG_RECONCILE 3

/* The register key of a cluster secret. */
void proto_reg_key(const char *secret, uint8_t out[PROTO_REG_KEY_LEN]);
/* The proof for nonce under reg_key. */
void proto_reg_proof(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                     const uint8_t nonce[PROTO_NONCE_LEN], uint8_t out[PROTO_PROOF_LEN]);
/* 1 if hex (2*PROTO_PROOF_LEN digits) is the proof for nonce, compared
 * in constant time; 0 otherwise. */
int proto_reg_proof_ok(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                       const uint8_t nonce[PROTO_NONCE_LEN], const char *hex, size_t len);

#endif
