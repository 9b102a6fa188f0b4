/* standalone/seg_warm.h - warming a fresh segment while the server serves.
 *
 * The first use of a fresh page costs a page fault and, on virtual
 * machines with shadow page tables, a trap per page and per kind of
 * access (core/memwarm.h): done up front on a 4 GB segment that was
 * seconds before the first PING. A warmer thread does it in the
 * background instead, from offset 0 upward (where best-fit placement
 * puts values first), at low priority: at once up to a window past the
 * store's highest reservation (seg_warm_note), as wide as the store's
 * recent reservations call for (a few MiB for small values, 64 MiB for
 * a stream of large ones), beyond it only while no
 * request came for a while (warming the rest of a gigabyte took more CPU
 * than a run of small SETs or GETs needs from the loop, and even a share
 * of it, niced, slowed the loop and its clients on a 2-core machine). It
 * only maps and reads pages, so requests
 * may use any page at any time: one the warmer has not reached yet is
 * just slower on its first use. */
#ifndef MKV_SEG_WARM_H
#define MKV_SEG_WARM_H

#include <stddef.h>
#include <stdint.h>

typedef struct seg_warmer seg_warmer;

/* Starts warming [base, base+len); NULL with the reason in err when no
 * thread could be started (the segment still works, only colder). */
seg_warmer *seg_warm_start(void *base, size_t len, char *err, size_t errlen);

/* The store served a request, and has reserved space up to end bytes
 * from base (lower ends than before, e.g. 0 from a read, change
 * nothing). One thread only (the event loop's); NULL w is fine. */
void seg_warm_note(seg_warmer *w, uint64_t end);

/* Progress for INFO: bytes warmed so far (len when done), and the time
 * the whole segment took (0 while warming). Safe from any thread. */
uint64_t seg_warm_bytes(const seg_warmer *w);
uint64_t seg_warm_ms(const seg_warmer *w);

/* Stops the thread (it finishes the chunk in hand) and frees w. NULL is fine. */
void seg_warm_stop(seg_warmer *w);

#endif
