/* fuzz_ended - the records of a MOON.MPUTEND PACKED reply
 * (proto/ended.c), a peer's bytes: decoding never reads past the blob;
 * a refusal's text lies inside it, and the records accepted, encoded
 * again, give the same bytes. Input: the blob. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto/ended.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const uint8_t *p = data, *end = data + size;
    resp_buf again;
    resp_buf_init(&again);
    char text[UINT16_MAX + 1];
    for (int rec = 0; rec < 256; rec++) {
        proto_ended e;
        if (proto_ended_next(&p, end, &e) != 0) break;
        if (p > end) abort();
        if (!e.err) {
            proto_ended_put_ok(&again);
            continue;
        }
        if ((const uint8_t *)e.err < data || (const uint8_t *)e.err + e.errlen > end) abort();
        /* the encoder takes a C string: a text with a NUL re-encodes shorter */
        memcpy(text, e.err, e.errlen);
        text[e.errlen] = '\0';
        if (strlen(text) != e.errlen) goto done;
        proto_ended_put_error(&again, text);
    }
    if (again.len != (size_t)(p - data) || (again.len && memcmp(again.data, data, again.len) != 0)) abort();
done:
    resp_buf_free(&again);
    return 0;
}
