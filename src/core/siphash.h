/* core/siphash.h - SipHash-2-4, a keyed PRF: the object table's hash
 * (random key per process, against hash flooding) and the MAC of data
 * plane capabilities and peer authentication. */
#ifndef MKV_SIPHASH_H
#define MKV_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define SIPHASH_KEY_LEN 16

uint64_t siphash24(const void *in, size_t len, const uint8_t key[SIPHASH_KEY_LEN]);
/* The 128-bit output variant (SipHash-2-4-128). */
void siphash24_128(const void *in, size_t len, const uint8_t key[SIPHASH_KEY_LEN],
                   uint8_t out[16]);
/* Fill buf with n bytes from the kernel's CSPRNG (getrandom); 0 on success. */
int random_bytes(void *buf, size_t n);

#endif
