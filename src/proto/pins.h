/* proto/pins.h - read pins on a prefix lookup's hits: MOON.PREFIXPIN and
 * MOON.UNPIN (PROTOCOL.md).
 *
 * MOON.PREFIXPIN id ms key [key ...] answers MOON.PREFIX's count and pins
 * the keys it counted under id, a nonzero 64-bit number the client draws,
 * for ms: until MOON.UNPIN id or the time runs out, a remove of a pinned
 * key is refused (TRYAGAIN) and garbage collection passes it over, so a
 * lookup's hits are still there when the engine loads them. The same id
 * again adds keys to the same pin (a lookup longer than one command).
 * Pins live in the master's memory only: a new leader starts with none,
 * and a client that follows it pins its live pins' keys again there with
 * MOON.REPIN id ms key [key ...] (by name: the new leader may not have
 * heard of them from the nodes yet). */
#ifndef MKV_PROTO_PINS_H
#define MKV_PROTO_PINS_H

#include <stdint.h>

#include "proto/verbs.h"   /* PROTO_VERB_PREFIXPIN, PROTO_VERB_UNPIN; their encoders: cmd.h */

#define PROTO_PIN_MAX_MS        600000u      /* a pin lasts at most 10 minutes */
#define PROTO_PIN_MAX_PER_CONN  65536u       /* keys one connection holds pinned at once */
#define PROTO_PIN_MAX_KEYS      (1u << 20)   /* keys pinned at once in the whole master */
#define PROTO_MAX_UNPIN         4096         /* ids per MOON.UNPIN */
#define PROTO_PIN_ID_MAX        (UINT64_MAX >> 1)   /* ids are 1 to 2^63-1 (a signed integer's range) */
/* A new leader (or a restarted master) holds removes and collection of
 * the objects it learnt from the nodes this long after its term began:
 * clients pin again on the new connection as soon as the old one goes
 * (libmoonkv's client/pinkeep.c), within a few hundred ms; until they
 * did, any such object may be one of their pinned keys. */
#define PROTO_REPIN_GRACE_MS    5000u

#endif
