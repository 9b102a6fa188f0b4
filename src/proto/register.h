/* proto/register.h - proofs of the cluster secret: the one a node
 * registers with (MOON.CHALLENGE, MOON.REGISTER) and the one that makes a
 * connection a member's (MOON.CHALLENGE, MOON.PROVE).
 *
 * Both sides derive a register key from the cluster secret; the peer
 * answers the master's nonce with SipHash-2-4-128 under that key, so the
 * secret itself never crosses the wire. A member proof hashes a label
 * before the nonce: it is never the register proof of the same nonce, so
 * neither can be replayed as the other. */
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

/* The proof MOON.PROVE sends for nonce under reg_key. */
void proto_member_proof(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                        const uint8_t nonce[PROTO_NONCE_LEN], uint8_t out[PROTO_PROOF_LEN]);
/* 1 if hex is the member proof for nonce (constant time), 0 otherwise. */
int proto_member_proof_ok(const uint8_t reg_key[PROTO_REG_KEY_LEN],
                          const uint8_t nonce[PROTO_NONCE_LEN], const char *hex, size_t len);
/* MOON.PROVE's argument for secret and a MOON.CHALLENGE reply of len
 * bytes, as hex into out: 0, or -1 if it is not a nonce. */
int proto_member_proof_hex(const char *secret, const void *nonce, size_t len,
                           char out[2 * PROTO_PROOF_LEN + 1]);

#endif
