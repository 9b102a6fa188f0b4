/* backend/cap.h - capabilities: the master's signed grant of a range.
 *
 * The master signs each extent it places (write) or leases (read) with a
 * key only it and the nodes hold; a node checks the MAC, the rights, the
 * expiry and that the request lies inside the granted range before it
 * touches its segment. Clients carry capabilities without being able to
 * forge them. */
#ifndef MKV_CAP_H
#define MKV_CAP_H

#include <stddef.h>
#include <stdint.h>

#include "backend/transport.h"

#define TE_CAP_KEY_LEN  16
#define TE_CAP_WIRE_LEN 64   /* fixed little-endian encoding */

void te_cap_sign(te_cap *cap, const uint8_t key[TE_CAP_KEY_LEN]);
/* TE_OK if cap is genuine, of the given master term, for node_id, grants
 * the op, is unexpired at now_ms, and [off, off+len) lies inside it
 * (overflow-safe); TE_EAUTH for a bad MAC/term/node/rights/expiry,
 * TE_ERANGE for a range outside it. The term fences a deposed master: a
 * node checks against the term of the master it registered with. */
int te_cap_check(const te_cap *cap, const uint8_t key[TE_CAP_KEY_LEN], uint64_t term,
                 uint32_t node_id, te_op op, uint64_t off, uint64_t len, uint64_t now_ms);
/* The checks that need no key (node, rights, expiry, range), same codes
 * as te_cap_check, which calls it after the MAC: for peers that can see
 * a capability but not verify it (the shm client side). */
int te_cap_check_nokey(const te_cap *cap, uint32_t node_id, te_op op, uint64_t off,
                       uint64_t len, uint64_t now_ms);
/* A read of an object on a node's disk tier (TE_READ_DISK) is granted
 * by a cap with rights TE_CAP_DISK alone, offset the object's CRC32C,
 * length its size and issued_us the tag of its key below: the node
 * serves only the record of that key tag, length and CRC, so the cap
 * bounds the reader to the object the master granted (never a segment
 * range: te_cap_check refuses a disk cap for anything else). */
uint64_t te_cap_disk_tag(const void *key, size_t keylen);
/* Wire form for RESP replies and the data-plane header. decode: 0 or -1. */
void te_cap_encode(const te_cap *cap, uint8_t out[TE_CAP_WIRE_LEN]);
int te_cap_decode(te_cap *cap, const uint8_t *in, size_t len);

#endif
