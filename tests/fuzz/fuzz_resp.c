/* fuzz_resp - the RESP request parser (resp/resp_parser.c) on arbitrary
 * bytes, fed in pieces whose sizes come from the input, with a bulk_dest
 * that gives some payloads external memory and the direct-read path used
 * for others, as networking.c does. Every argument must lie inside its
 * buffer, and parsing must never report more bytes than it was given;
 * resp_peek_keys's spans too. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "resp/resp_parser.h"

#define EXT_MAX (1 << 16)

typedef struct dest {
    char buf[EXT_MAX];
    int enabled;
} dest;

static void *bulk_dest(void *ctx, const resp_arg *argv, int argi, int argc, size_t len) {
    dest *d = ctx;
    /* Like SET's value: argument 2 of a 3-argument command, if it fits. */
    if (!d->enabled || argi != 2 || argc != 3 || len > sizeof d->buf) return NULL;
    (void)argv;
    return d->buf;
}

static void check_command(resp_parser *p) {
    int argc = resp_parser_argc(p);
    resp_arg *argv = resp_parser_argv(p);
    if (argc <= 0) abort();
    for (int i = 0; i < argc; i++) {
        /* Touch every byte: ASan catches an argument that overruns. */
        volatile char sink = 0;
        for (size_t k = 0; k < argv[i].len; k++) sink ^= argv[i].ptr[k];
        if (!argv[i].external && argv[i].ptr[argv[i].len] != '\0') abort();
        (void)sink;
    }
    resp_parser_reset(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    static dest d;
    /* byte 0: piece size (1..64, 0 = all at once); byte 1: options */
    size_t piece = data[0] % 65;
    d.enabled = data[1] & 1;
    int direct = data[1] & 2;
    resp_limits lim = {0};
    if (data[1] & 4) lim = (resp_limits){.max_bulk_len = 16384, .max_multibulk_len = 10,
                                         .max_inline_len = 16384, .scope = "unauthenticated"};
    data += 2;
    size -= 2;

    /* The look-ahead networking runs over each read: spans inside it. */
    resp_span keys[16];
    size_t nkeys = resp_peek_keys((const char *)data, size, keys, 16);
    if (nkeys > 16) abort();
    for (size_t i = 0; i < nkeys; i++)
        if (keys[i].ptr < (const char *)data || keys[i].len > size ||
            keys[i].ptr + keys[i].len > (const char *)data + size)
            abort();

    resp_parser *p = resp_parser_create(&lim);
    resp_parser_set_bulk_dest(p, bulk_dest, &d);
    size_t pos = 0;
    while (pos < size) {
        char *dst;
        size_t span = direct ? resp_parser_direct_span(p, &dst) : 0;
        if (span) {   /* read() straight into the payload's home */
            size_t n = size - pos < span ? size - pos : span;
            memcpy(dst, data + pos, n);
            resp_parser_direct_advance(p, n);
            pos += n;
            continue;
        }
        size_t len = piece && size - pos > piece ? piece : size - pos;
        size_t used = 0;
        resp_status st = resp_parser_feed(p, (const char *)data + pos, len, &used);
        if (used > len) abort();
        pos += used;
        if (st == RESP_ERROR) {
            if (strncmp(resp_parser_errstr(p), "Protocol error: ", 16) != 0) abort();
            break;
        }
        if (st == RESP_COMMAND) check_command(p);
        else if (used != len) abort();   /* AGAIN takes everything */
    }
    resp_parser_free(p);
    return 0;
}
