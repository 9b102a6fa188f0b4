/* core/siphash.c - SipHash-2-4 (64 and 128-bit output) and random_bytes.
 *
 * Follows the SipHash paper (Aumasson, Bernstein): four 64-bit lanes, two
 * compression rounds per 8-byte word, four finalization rounds. Input is
 * read little-endian through memcpy, so alignment never matters. */
#include "core/siphash.h"

#include <endian.h>
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))

/* Every helper is forced inline so the four lanes stay in registers: as
 * calls through a state pointer, with the input read a byte at a time,
 * hashing a 16-byte key took twice as long (the master hashes every key
 * of a batch, and MACs every capability it grants). */
#define SIP_INLINE static inline __attribute__((always_inline))

typedef struct sip_state { uint64_t v0, v1, v2, v3; } sip_state;

SIP_INLINE uint64_t load_le64(const uint8_t *p) {
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return le64toh(v);
}

static void store_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

SIP_INLINE void sip_round(sip_state *s) {
    s->v0 += s->v1; s->v1 = ROTL(s->v1, 13); s->v1 ^= s->v0; s->v0 = ROTL(s->v0, 32);
    s->v2 += s->v3; s->v3 = ROTL(s->v3, 16); s->v3 ^= s->v2;
    s->v0 += s->v3; s->v3 = ROTL(s->v3, 21); s->v3 ^= s->v0;
    s->v2 += s->v1; s->v1 = ROTL(s->v1, 17); s->v1 ^= s->v2; s->v2 = ROTL(s->v2, 32);
}

SIP_INLINE void sip_compress(sip_state *s, uint64_t m) {
    s->v3 ^= m;
    sip_round(s);
    sip_round(s);
    s->v0 ^= m;
}

SIP_INLINE uint64_t sip_finish_word(sip_state *s) {
    for (int i = 0; i < 4; i++) sip_round(s);
    return s->v0 ^ s->v1 ^ s->v2 ^ s->v3;
}

/* Absorbs the whole message; wide selects the 128-bit variant's tweaks. */
SIP_INLINE void sip_absorb(sip_state *s, const uint8_t *in, size_t len,
                           const uint8_t key[SIPHASH_KEY_LEN], int wide) {
    uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
    s->v0 = k0 ^ 0x736f6d6570736575ULL;
    s->v1 = k1 ^ 0x646f72616e646f6dULL;
    s->v2 = k0 ^ 0x6c7967656e657261ULL;
    s->v3 = k1 ^ 0x7465646279746573ULL;
    if (wide) s->v1 ^= 0xee;

    size_t full = len & ~(size_t)7;
    for (size_t i = 0; i < full; i += 8) sip_compress(s, load_le64(in + i));

    /* Last word: remaining bytes plus the length's low byte on top. */
    uint8_t tail[8] = {0};
    memcpy(tail, in + full, len & 7);
    sip_compress(s, load_le64(tail) | (uint64_t)(len & 0xff) << 56);
}

uint64_t siphash24(const void *in, size_t len, const uint8_t key[SIPHASH_KEY_LEN]) {
    sip_state s;
    sip_absorb(&s, in, len, key, 0);
    s.v2 ^= 0xff;
    return sip_finish_word(&s);
}

void siphash24_128(const void *in, size_t len, const uint8_t key[SIPHASH_KEY_LEN],
                   uint8_t out[16]) {
    sip_state s;
    sip_absorb(&s, in, len, key, 1);
    s.v2 ^= 0xee;
    store_le64(out, sip_finish_word(&s));
    s.v1 ^= 0xdd;
    store_le64(out + 8, sip_finish_word(&s));
}

int random_bytes(void *buf, size_t n) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}
