/* core/util.h - small helpers shared by every module. */
#ifndef MKV_UTIL_H
#define MKV_UTIL_H

#include <stddef.h>
#include <stdint.h>

/* Allocation that aborts on out-of-memory with a log line (as Redis does). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t sz);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
void *xmemdup(const void *p, size_t n);

/* Large transient arrays (a rebuild's reports and indexes): from 2 MiB
 * up, anonymous memory on transparent huge pages where the kernel allows
 * them, so filling it faults once per 2 MiB instead of per 4 KiB (page
 * faults are dear in a VM). Smaller sizes come from malloc. Zeroed when
 * allocated (realloc: the grown tail is unspecified); pass the same size
 * back to free. Aborts on out-of-memory. */
void *xhuge_alloc(size_t n);
void *xhuge_realloc(void *p, size_t old, size_t n);
void xhuge_free(void *p, size_t n);

uint64_t mono_us(void);    /* monotonic microseconds */
uint64_t mono_ms(void);
/* mono_ms as of the last timer tick (CLOCK_MONOTONIC_COARSE): up to a
 * tick (1-10 ms) behind mono_ms, never ahead of it, and it reads no clock
 * source (a clock read cost tens of ns on a VM). For stamps that only
 * rank things or are later subtracted from a mono_ms. */
uint64_t mono_ms_coarse(void);
uint64_t wall_ms(void);    /* unix time in milliseconds */

/* Parse "512MB", "4GB", "64KiB", "1024" into bytes. 0 on success, -1 on
 * a malformed number, unknown unit or overflow. */
int parse_size(const char *s, uint64_t *out);
/* Parse "host:port"; 0 on success. host must hold hostlen bytes. */
int parse_hostport(const char *s, char *host, size_t hostlen, int *port);

/* v in decimal into out (21 bytes: up to 20 digits and a NUL); the
 * digits' count. snprintf's format pass costs more than the digits. */
size_t u64_decimal(uint64_t v, char out[21]);
/* Lowercase hex of n bytes into out (2n+1 bytes, NUL terminated). */
void hex_encode(const uint8_t *p, size_t n, char *out);
/* Decode exactly 2*outlen hex digits (either case); -1 on a wrong length
 * or a non-hex character, leaving out unspecified. */
int hex_decode(const char *s, size_t len, uint8_t *out, size_t outlen);

/* Case-insensitive compare of a length-bounded string with a C string. */
int strieq_len(const char *a, size_t alen, const char *b);

#endif
