/* core/pinset.h - pins on prefix hits (MOON.PREFIXPIN, proto/pins.h): the
 * state the master and a standalone server keep alike.
 *
 * Kept beside an object table, not in it: a table of pinned keys (how
 * many pins hold each), one of pins by id (their keys and expiry) and one
 * of keys pinned per owner (a connection), for the bounds. The owner of
 * the objects asks pinset_left before a remove (refused while pinned) and
 * before collecting one. Keys are names: a key may be pinned before the
 * table holds it (a new leader that has not heard of it yet). Pure state
 * on the caller's clock. */
#ifndef MKV_CORE_PINSET_H
#define MKV_CORE_PINSET_H

#include <stddef.h>
#include <stdint.h>

typedef struct pinset pinset;

typedef struct pin_key {
    const void *key;
    size_t keylen;
} pin_key;

/* At most max_per_owner keys pinned per owner, max_keys in all. */
pinset *pinset_create(uint32_t max_per_owner, uint32_t max_keys);
void pinset_destroy(pinset *p);   /* NULL is fine */

/* Pin keys[0..n) under id (nonzero) until until_ms, counted against
 * owner; 0, or -1 with err set and nothing pinned (id 0, a bound passed).
 * A live id takes the keys in (its time the later of the two), counted
 * against the owner that made it (a pooled client may add on another
 * connection). A key the live pin holds already is not added again (the
 * same lookup again, a re-pin after a reconnect); a key given twice in
 * one call is held twice, as the lookup counted it. */
int pinset_add(pinset *p, uint64_t id, uint64_t owner, const pin_key *keys, size_t n, uint64_t until_ms,
               uint64_t now_ms, char *err, size_t errlen);
/* Unpin id: how many keys it held (0: no such pin, or it expired). */
size_t pinset_release(pinset *p, uint64_t id, uint64_t now_ms);
/* How long a live pin still holds key: 0 if none does. */
uint64_t pinset_left(pinset *p, const void *key, size_t keylen, uint64_t now_ms);
/* Drop the pins whose time ran out (cheap when none is due). */
void pinset_expire(pinset *p, uint64_t now_ms);

typedef struct pinset_stats {
    uint64_t pins, keys;          /* live now (expired ones not yet swept may count) */
    uint64_t refused;             /* removes refused for a pin, ever */
} pinset_stats;
void pinset_get_stats(const pinset *p, pinset_stats *st);
void pinset_refused(pinset *p);   /* count one refused remove */

#endif
