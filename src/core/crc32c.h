/* core/crc32c.h - CRC32C (Castagnoli), the checksum every object carries.
 * Uses the SSE4.2 crc32 instruction when the CPU has it, a table otherwise. */
#ifndef MKV_CRC32C_H
#define MKV_CRC32C_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Continue a checksum: crc32c(0, buf, len) starts one; feeding the pieces
 * of a buffer in order gives the checksum of the whole. */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
/* Same result, software only (for tests and for CPUs without SSE4.2). */
uint32_t crc32c_sw(uint32_t crc, const void *buf, size_t len);
/* 1 when the hardware path is in use. */
int crc32c_hw_available(void);
/* Checksum of the concatenation A||B from crc(A), crc(B) and len(B), so
 * slices checksummed in parallel combine into the object's checksum. */
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/* memcpy(dst, src, len) and crc32c(crc, src, len) in one pass: each word
 * loaded once, stored and fed to the checksum. Buffers must not overlap. */
uint32_t crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);
/* crc32c_copy between one run of memory and pieces, in order: gather
 * copies the pieces one after the other into dst, scatter src's bytes
 * over the pieces. The checksum is the run's. For large transfers only:
 * every piece of 1 KiB up stores streaming (its destination is no more in
 * cache than a whole large copy's), and a gather prefetches each next
 * piece while it copies the one before (pieces of a layer-major arena are
 * streams the hardware prefetcher has not seen). */
uint32_t crc32c_copy_gather(uint32_t crc, void *dst, const struct iovec *src, int n);
/* crc32c over the pieces in order, as one buffer, each next piece
 * prefetched as the one before ends (the sum of a put sent from pieces). */
uint32_t crc32c_sumv(uint32_t crc, const struct iovec *iov, int n);
uint32_t crc32c_copy_scatter(uint32_t crc, const struct iovec *dst, int n, const void *src);

/* crc32c(0, buf, len), with buffers of CRC32C_PARALLEL_MIN bytes or more
 * split over wp's threads (NULL wp: this thread alone). */
#define CRC32C_PARALLEL_MIN (2u << 20)
struct workpool;
uint32_t crc32c_parallel(struct workpool *wp, const void *buf, size_t len);

#endif
