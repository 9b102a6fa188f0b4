/* master/pins.h - pins on prefix hits (MOON.PREFIXPIN, proto/pins.h).
 *
 * Kept beside the object table, not in it: a table of pinned keys (how
 * many pins hold each), one of pins by id (their keys and expiry) and one
 * of keys pinned per owner (a connection), for the bounds. A pinned key
 * may not be removed (mm_remove answers TRYAGAIN) nor collected; a node's
 * death still takes its replicas. Pure state on the caller's clock. */
#ifndef MKV_MASTER_PINS_H
#define MKV_MASTER_PINS_H

#include <stddef.h>
#include <stdint.h>

#include "master/meta.h"

typedef struct mm_pins mm_pins;

mm_pins *mm_pins_create(void);
mm_pins *mm_pins_of(master_meta *m);   /* the master's own */
void mm_pins_destroy(mm_pins *p);   /* NULL is fine */

/* Pin keys[0..n) (their key and keylen) under id (nonzero) until until_ms,
 * counted against owner: at most PROTO_PIN_MAX_PER_CONN keys per owner and
 * PROTO_PIN_MAX_KEYS in all, else PROTO_ERR and nothing pinned. A live id
 * takes the keys in (its time the later of the two), counted against the
 * owner that made it (a pooled client may add on another connection). */
proto_status mm_pins_add(mm_pins *p, uint64_t id, uint64_t owner, const mm_item *keys, size_t n,
                         uint64_t until_ms, uint64_t now_ms, char *err, size_t errlen);
/* Unpin id: how many keys it held (0: no such pin, or it expired). */
size_t mm_pins_release(mm_pins *p, uint64_t id, uint64_t now_ms);
/* How long a live pin still holds key: 0 if none does. */
uint64_t mm_pins_left(mm_pins *p, const void *key, size_t keylen, uint64_t now_ms);
/* Drop the pins whose time ran out (cheap when none is due). */
void mm_pins_expire(mm_pins *p, uint64_t now_ms);

typedef struct mm_pin_stats {
    uint64_t pins, keys;          /* live now (expired ones not yet swept may count) */
    uint64_t refused;             /* removes refused for a pin, ever */
} mm_pin_stats;
void mm_pins_stats(const mm_pins *p, mm_pin_stats *st);
void mm_pins_refused(mm_pins *p);   /* count one refused remove */

#endif
