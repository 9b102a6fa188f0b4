/* backend/shm_warm.h - which chunks of a fresh shm mapping are warm.
 *
 * Under a hypervisor that shadows the guest's page tables (this
 * project's VM), a process's first access to each 4 KiB page of a
 * mapping traps, 6-19 us a page, however the kernel filled the page
 * tables (MADV_POPULATE_WRITE included): about a second per GB. A
 * shm_warm records, per SHM_WARM_CHUNK, whether this process has paid
 * that for a chunk yet, so a transfer can go through the mapping where it
 * is warm and through the node's fd elsewhere (the kernel copies through
 * its own mapping, which never traps), instead of every client waiting
 * for a whole segment at connect.
 *
 * One thread at a time calls shm_warm_step, which warms one chunk: the
 * last one a transfer found cold, else (when asked to sweep) the next
 * cold one upward from offset 0 (where the node's best-fit placement puts
 * objects first).
 * Warming only populates and reads pages, never changes a byte.
 * shm_warm_ready and shm_warm_bytes may be called from any thread: a
 * chunk reads warm only after its warming finished (release/acquire), so
 * copies through the mapping never overlap the warmer's loads. */
#ifndef MKV_SHM_WARM_H
#define MKV_SHM_WARM_H

#include <stdint.h>

#define SHM_WARM_CHUNK (2ULL << 20)   /* a huge page: the unit of progress */

typedef struct shm_warm shm_warm;

/* Bookkeeping for the mapping [base, base+size), all of it cold. */
shm_warm *shm_warm_new(char *base, uint64_t size);
void shm_warm_free(shm_warm *w);

/* 1 when every chunk that [off, off+len) touches is warm; otherwise 0,
 * and the first cold one becomes the next shm_warm_step's (a range that
 * is empty or not inside the mapping is never ready). */
int shm_warm_ready(shm_warm *w, uint64_t off, uint64_t len);

/* Warms one cold chunk: SHM_WARM_ASKED when it was one a transfer found
 * cold, else with sweep the next in order (SHM_WARM_SWEPT); SHM_WARM_NONE
 * (0) when there was none to warm. */
enum { SHM_WARM_NONE = 0, SHM_WARM_SWEPT = 1, SHM_WARM_ASKED = 2 };
int shm_warm_step(shm_warm *w, int sweep);

/* 1 when a transfer found a chunk cold that is not warmed yet. */
int shm_warm_asked(const shm_warm *w);
/* 1 when every chunk is warm. */
int shm_warm_done(const shm_warm *w);

/* Bytes in warm chunks (the mapping's size once all are). */
uint64_t shm_warm_bytes(const shm_warm *w);

#endif
