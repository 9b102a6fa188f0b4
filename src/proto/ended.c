/* proto/ended.c - see ended.h. */
#include "proto/ended.h"

#include "proto/placed.h"

#define ENDED_OK 0   /* a refusal is placed.h's record, tag 1 */

void proto_ended_put_ok(resp_buf *b) {
    uint8_t tag = ENDED_OK;
    resp_buf_append(b, &tag, 1);
}

void proto_ended_put_error(resp_buf *b, const char *text) { proto_placed_put_error(b, text); }

int proto_ended_next(const uint8_t **p, const uint8_t *end, proto_ended *out) {
    *out = (proto_ended){0};
    if (*p >= end) return -1;
    if (**p == ENDED_OK) {
        (*p)++;
        return 0;
    }
    /* placed.h's decoder: its tag 0 (a placement) was taken above, and
     * without a buffer it takes only a refusal anyway */
    proto_placed pl;
    if (proto_placed_next(p, end, 0, 0, NULL, &pl) != 0) return -1;
    out->err = pl.err;
    out->errlen = pl.errlen;
    return 0;
}
