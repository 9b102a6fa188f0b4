/* resp/resp_writer.c - reply encoding into a growing buffer. */
#include "resp/resp_writer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void resp_buf_init(resp_buf *b) { memset(b, 0, sizeof *b); }

void resp_buf_free(resp_buf *b) {
    free(b->data);
    resp_buf_init(b);
}

void resp_buf_clear(resp_buf *b) { b->len = 0; }

static void reserve(resp_buf *b, size_t n) {
    if (n <= b->cap - b->len) return;
    if (n > (size_t)-1 / 2 - b->len) goto oom;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < b->len + n) cap *= 2;
    char *d = realloc(b->data, cap);
    if (!d) goto oom;
    b->data = d;
    b->cap = cap;
    return;
oom:
    fprintf(stderr, "resp_writer: out of memory growing reply buffer by %zu bytes\n", n);
    abort();
}

void resp_buf_append(resp_buf *b, const void *p, size_t n) {
    if (n == 0) return;
    reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* "<type><v>\r\n" without printf: this is on every reply. */
static void add_prefixed_ll(resp_buf *b, char type, long long v) {
    char tmp[24], *e = tmp + sizeof tmp, *s = e;
    unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    *--s = '\n';
    *--s = '\r';
    do { *--s = (char)('0' + u % 10); u /= 10; } while (u);
    if (v < 0) *--s = '-';
    *--s = type;
    resp_buf_append(b, s, (size_t)(e - s));
}

static void add_line(resp_buf *b, char type, const char *s, size_t n) {
    reserve(b, n + 3);
    b->data[b->len++] = type;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len++] = '\r';
    b->data[b->len++] = '\n';
}

void resp_add_simple(resp_buf *b, const char *s) { add_line(b, '+', s, strlen(s)); }

void resp_add_error(resp_buf *b, const char *s) {
    size_t n = strlen(s), start = b->len + 1;
    add_line(b, '-', s, n);
    for (size_t i = 0; i < n; i++) {
        char *c = b->data + start + i;
        if (*c == '\r' || *c == '\n') *c = ' ';
    }
}

void resp_add_errorf(resp_buf *b, const char *fmt, ...) {
    char small[256], *msg = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0, small[0] = '\0';
    if ((size_t)n >= sizeof small) {
        msg = malloc((size_t)n + 1);
        if (!msg) { fprintf(stderr, "resp_writer: out of memory\n"); abort(); }
        va_start(ap, fmt);
        vsnprintf(msg, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    resp_add_error(b, msg);
    if (msg != small) free(msg);
}

void resp_add_integer(resp_buf *b, long long v) { add_prefixed_ll(b, ':', v); }

void resp_add_bulk_header(resp_buf *b, size_t n) { add_prefixed_ll(b, '$', (long long)n); }

void resp_add_bulk(resp_buf *b, const void *p, size_t n) {
    resp_add_bulk_header(b, n);
    reserve(b, n + 2);
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len++] = '\r';
    b->data[b->len++] = '\n';
}

void resp_add_bulk_cstr(resp_buf *b, const char *s) { resp_add_bulk(b, s, strlen(s)); }

void resp_add_null(resp_buf *b, int proto) {
    if (proto == 3) resp_buf_append(b, "_\r\n", 3);
    else resp_buf_append(b, "$-1\r\n", 5);
}

void resp_add_null_array(resp_buf *b, int proto) {
    if (proto == 3) resp_buf_append(b, "_\r\n", 3);
    else resp_buf_append(b, "*-1\r\n", 5);
}

void resp_add_array(resp_buf *b, long long n) { add_prefixed_ll(b, '*', n); }

void resp_add_map(resp_buf *b, int proto, long long n) {
    if (proto == 3) add_prefixed_ll(b, '%', n);
    else add_prefixed_ll(b, '*', n * 2);
}

void resp_add_set(resp_buf *b, int proto, long long n) {
    add_prefixed_ll(b, proto == 3 ? '~' : '*', n);
}

void resp_add_push(resp_buf *b, int proto, long long n) {
    add_prefixed_ll(b, proto == 3 ? '>' : '*', n);
}

/* Redis 7: "inf"/"-inf"/"nan" spelled out, everything else "%.17g". */
void resp_add_double(resp_buf *b, int proto, double d) {
    char s[64];
    int n;
    if (isnan(d)) n = snprintf(s, sizeof s, "nan");
    else if (isinf(d)) n = snprintf(s, sizeof s, "%s", d > 0 ? "inf" : "-inf");
    else n = snprintf(s, sizeof s, "%.17g", d);
    if (proto == 3) add_line(b, ',', s, (size_t)n);
    else resp_add_bulk(b, s, (size_t)n);
}

void resp_add_bool(resp_buf *b, int proto, int v) {
    if (proto == 3) resp_buf_append(b, v ? "#t\r\n" : "#f\r\n", 4);
    else resp_buf_append(b, v ? ":1\r\n" : ":0\r\n", 4);
}

void resp_add_verbatim(resp_buf *b, int proto, const char *fmt3, const void *p, size_t n) {
    if (proto != 3) {
        resp_add_bulk(b, p, n);
        return;
    }
    add_prefixed_ll(b, '=', (long long)(n + 4));
    reserve(b, n + 6);
    memcpy(b->data + b->len, fmt3, 3);
    b->data[b->len + 3] = ':';
    b->len += 4;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len++] = '\r';
    b->data[b->len++] = '\n';
}
