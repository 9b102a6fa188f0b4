/* proto/chunks.c - see chunks.h. */
#include "proto/chunks.h"

#include <stdio.h>
#include <string.h>

uint64_t proto_chunk_size_for(uint64_t segment_size) {
    uint64_t c = PROTO_MIN_CHUNK;
    while (c < segment_size / 64 || segment_size / c >= PROTO_MAX_CHUNKS) c <<= 1;
    return c;
}

int proto_chunks_init(proto_chunks *c, uint64_t segment_size, uint64_t chunk_size) {
    memset(c, 0, sizeof *c);
    if (chunk_size < PROTO_MIN_CHUNK || (chunk_size & (chunk_size - 1)) || segment_size == 0) return -1;
    uint64_t n = segment_size / chunk_size + (segment_size % chunk_size != 0);
    if (n > PROTO_MAX_CHUNKS) return -1;
    c->chunk_size = chunk_size;
    c->n = (uint32_t)n;
    return 0;
}

void proto_chunks_set(proto_chunks *c, uint32_t i, int on) {
    if (i >= c->n) return;
    if (on) c->bits[i / 8] |= (uint8_t)(1u << (i % 8));
    else c->bits[i / 8] &= (uint8_t)~(1u << (i % 8));
}

uint32_t proto_chunks_count(const proto_chunks *c) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < c->n; i++) k += proto_chunks_has(c, i);
    return k;
}

void proto_chunk_range(const proto_chunks *c, uint64_t segment_size, uint32_t i, uint64_t *off, uint64_t *len) {
    *off = (uint64_t)i * c->chunk_size;
    *len = *off >= segment_size ? 0 : segment_size - *off < c->chunk_size ? segment_size - *off : c->chunk_size;
}

size_t proto_chunks_format(const proto_chunks *c, char *out, size_t cap) {
    static const char hex[] = "0123456789abcdef";
    int len = snprintf(out, cap, "%llu:", (unsigned long long)c->chunk_size);
    if (len < 0 || (size_t)len >= cap) return 0;
    size_t at = (size_t)len, last = at;
    for (uint32_t d = 0; d * 4 < c->n && at + 1 < cap; d++) {
        unsigned v = (c->bits[d / 2] >> (d % 2 * 4)) & 15;
        out[at++] = hex[v];
        if (v) last = at;
    }
    if (last == (size_t)len) out[last++] = '-';
    out[last] = 0;
    return last;
}

static int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

int proto_chunks_parse(const char *s, size_t len, uint64_t segment_size, proto_chunks *c) {
    uint64_t size = 0;
    size_t i = 0;
    for (; i < len && i < 20 && s[i] >= '0' && s[i] <= '9'; i++) size = size * 10 + (uint64_t)(s[i] - '0');
    if (i == 0 || i >= len || s[i] != ':' || proto_chunks_init(c, segment_size, size) != 0) return -1;
    i++;
    if (len - i == 1 && s[i] == '-') return 0;
    for (uint32_t d = 0; i < len; i++, d++) {
        int v = hexval(s[i]);
        if (v < 0 || (uint64_t)d * 4 >= c->n) return -1;
        for (int b = 0; b < 4; b++) {
            if (!((v >> b) & 1)) continue;
            if (d * 4 + (uint32_t)b >= c->n) return -1;
            proto_chunks_set(c, d * 4 + (uint32_t)b, 1);
        }
    }
    return 0;
}
