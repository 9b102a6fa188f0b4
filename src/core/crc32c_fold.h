/* core/crc32c_fold.h - CRC32C by carry-less multiplication on 512-bit
 * vectors (AVX-512 VPCLMULQDQ), for core/crc32c.c only.
 *
 * Sixteen 128-bit lanes each fold their bytes forward by 256 bytes per
 * round: two multiplies and an XOR per 64 bytes instead of eight crc32
 * instructions, so a pass over memory not in cache runs at the memory's
 * speed rather than the crc32 unit's (about half that on this host). */
#ifndef MKV_CRC32C_FOLD_H
#define MKV_CRC32C_FOLD_H

#include <stddef.h>
#include <stdint.h>

#define CRC32C_FOLD_BLOCK 256   /* bytes per round: lengths are multiples of it */

/* Builds the constants; 1 when the CPU has AVX-512F/VL and VPCLMULQDQ.
 * Called once by crc32c.c's initialiser, before any crc32c_fold. */
int crc32c_fold_init(void);

/* The raw register (no inversions) after len bytes of src, len a positive
 * multiple of CRC32C_FOLD_BLOCK. With dst, the bytes are also copied
 * there as they are loaded, with plain stores. */
uint32_t crc32c_fold(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len);

/* The same copy with streaming stores (VMOVNTDQ: no read of the
 * destination's lines first, and they do not fill the cache), dst 64-byte
 * aligned. For large copies to memory not in cache: 256 KiB to 64 MiB
 * between buffers not in cache measured 1.1-1.25x the plain stores here
 * into a shared-memory segment, 1.0-1.1x out of one (medians of 21
 * interleaved samples); into a destination still in cache they lose.
 * next: where the source goes on after src + len (the next piece of a
 * gather), prefetched as the copy nears its end; NULL: src + len. The
 * stores are weakly ordered: the caller fences (_mm_sfence) before it
 * publishes the bytes, once after all its pieces. */
uint32_t crc32c_fold_stream(uint32_t reg, uint8_t *dst, const uint8_t *src, size_t len, const uint8_t *next);
/* crc32c_fold's sum, prefetching as crc32c_fold_stream (next not NULL). */
uint32_t crc32c_fold_ahead(uint32_t reg, const uint8_t *src, size_t len, const uint8_t *next);

#endif
