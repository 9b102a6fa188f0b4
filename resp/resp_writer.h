/* resp/resp_writer.h - encoding replies, RESP2 and RESP3.
 *
 * Everything appends to a resp_buf. Functions taking `proto` pick the
 * RESP3 type (map, set, null, double, boolean, verbatim) when proto == 3
 * and the RESP2 fallback Redis uses otherwise. Out of memory aborts. */
#ifndef MKV_RESP_WRITER_H
#define MKV_RESP_WRITER_H

#include <stddef.h>

typedef struct resp_buf {
    char *data;
    size_t len;
    size_t cap;
} resp_buf;

void resp_buf_init(resp_buf *b);
void resp_buf_free(resp_buf *b);
void resp_buf_clear(resp_buf *b);
void resp_buf_append(resp_buf *b, const void *p, size_t n);

void resp_add_simple(resp_buf *b, const char *s);        /* +s */
/* -s ; s is the whole message ("ERR unknown command ..."); CR/LF inside
 * are replaced by spaces so a reply can never be split. */
void resp_add_error(resp_buf *b, const char *s);
void resp_add_errorf(resp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void resp_add_integer(resp_buf *b, long long v);         /* :v */
void resp_add_bulk(resp_buf *b, const void *p, size_t n);/* $n ... */
void resp_add_bulk_cstr(resp_buf *b, const char *s);
void resp_add_bulk_header(resp_buf *b, size_t n);        /* "$n\r\n" only: body sent elsewhere, then "\r\n" */
void resp_add_null(resp_buf *b, int proto);              /* $-1 or _ */
void resp_add_null_array(resp_buf *b, int proto);        /* *-1 or _ */
void resp_add_array(resp_buf *b, long long n);           /* *n */
void resp_add_map(resp_buf *b, int proto, long long n);  /* %n or *2n */
void resp_add_set(resp_buf *b, int proto, long long n);  /* ~n or *n */
void resp_add_push(resp_buf *b, int proto, long long n); /* >n or *n */
void resp_add_double(resp_buf *b, int proto, double d);  /* ,d or bulk */
void resp_add_bool(resp_buf *b, int proto, int v);       /* #t/#f or :1/:0 */
/* =len\r\ntxt:... in RESP3, a plain bulk in RESP2. fmt3 is 3 chars, e.g. "txt". */
void resp_add_verbatim(resp_buf *b, int proto, const char *fmt3, const void *p, size_t n);

#endif
