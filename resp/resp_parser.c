/* resp/resp_parser.c - incremental RESP2 request parser.
 *
 * A state machine fed arbitrary chunks. Header and inline lines that are
 * complete inside the chunk are parsed in place; only a line split across
 * chunks is gathered in p->line. Payloads are copied once, into their
 * destination (bulk_dest memory or a parser-owned buffer that grows with
 * the bytes actually received, so a peer claiming 512 MiB and sending 10
 * bytes costs 64 KiB, not 512 MiB). */
#include "resp/resp_parser.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARGV_PREALLOC_MAX  1024          /* argv slots trusted up front */
#define BULK_ONESHOT_MAX   (64 * 1024)   /* bulks allocated whole at once */
/* Bulks up to ARENA_ARG_MAX bytes are carved from blocks of the parser's
 * own (a malloc and a free per key was ~10% of a master answering
 * 4096-key batches). Blocks start at ARENA_FIRST bytes and double up to
 * ARENA_MAX; a reset empties them and keeps only a block of at most
 * ARENA_KEEP, so an idle connection holds little. */
#define ARENA_ARG_MAX      256
#define ARENA_FIRST        1024
#define ARENA_MAX          (64 * 1024)
#define ARENA_KEEP         (4 * 1024)

typedef enum {
    ST_IDLE,       /* between commands */
    ST_INLINE,     /* gathering an inline line */
    ST_MB_COUNT,   /* gathering "*<n>\r\n" */
    ST_BULK_HDR,   /* gathering "$<len>\r\n" */
    ST_BULK_BODY,  /* receiving payload bytes */
    ST_BULK_CRLF,  /* expecting the "\r\n" after a payload */
    ST_DONE,       /* a command is in argv */
    ST_ERROR
} parse_state;

char resp_bulk_discard_mark;   /* only its address is used */

typedef struct arena_block {
    struct arena_block *next;   /* older blocks */
    size_t used, cap;
    char data[];
} arena_block;

struct resp_parser {
    resp_limits lim;
    resp_bulk_dest_fn *dest;
    void *dest_ctx;
    parse_state state;
    int is_inline;

    resp_arg *argv;
    int argc;          /* arguments complete so far */
    int argcap;
    long long mbtotal; /* argc the multibulk header announced */

    char *line;        /* a header/inline line split across feeds */
    size_t linelen, linecap;
    char *scratch;     /* inline argument decoding */
    size_t scratchcap;

    arena_block *arena; /* small arguments of the current command, newest block first */
    resp_arg bulk;     /* payload in progress: bulk.len is the claimed length */
    size_t bulkgot, bulkcap;
    int crlfgot;
    int discard;       /* bulk's bytes are dropped (RESP_BULK_DISCARD) */

    char err[RESP_ERRSTR_LEN];
};

/* ---------------------------------------------------------------- memory */

static void *xalloc_or_die(void *old, size_t n) {
    void *p = realloc(old, n ? n : 1);
    if (!p) {
        fprintf(stderr, "resp_parser: out of memory allocating %zu bytes\n", n);
        abort();
    }
    return p;
}

static void set_error(resp_parser *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    p->state = ST_ERROR;
}

void resp_parser_set_limits(resp_parser *p, const resp_limits *limits) {
    memset(&p->lim, 0, sizeof p->lim);
    if (limits) p->lim = *limits;
    if (p->lim.max_bulk_len <= 0) p->lim.max_bulk_len = RESP_PROTO_MAX_BULK_LEN;
    if (p->lim.max_multibulk_len <= 0) p->lim.max_multibulk_len = RESP_MAX_MULTIBULK_LEN;
    if (p->lim.max_multibulk_len > INT32_MAX) p->lim.max_multibulk_len = INT32_MAX;
    if (p->lim.max_inline_len == 0) p->lim.max_inline_len = RESP_MAX_INLINE_LEN;
}

resp_parser *resp_parser_create(const resp_limits *limits) {
    resp_parser *p = xalloc_or_die(NULL, sizeof *p);
    memset(p, 0, sizeof *p);
    resp_parser_set_limits(p, limits);
    p->state = ST_IDLE;
    return p;
}

/* A well-formed count above the limit: "invalid", or the limits' scope. */
static void over_limit(resp_parser *p, const char *what) {
    set_error(p, "Protocol error: %s %s length", p->lim.scope ? p->lim.scope : "invalid", what);
}

/* n bytes (n <= ARENA_ARG_MAX + 1) that live until the next reset. */
static char *arena_alloc(resp_parser *p, size_t n) {
    arena_block *b = p->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = b ? b->cap * 2 : ARENA_FIRST;
        if (cap > ARENA_MAX) cap = ARENA_MAX;
        arena_block *nb = xalloc_or_die(NULL, sizeof *nb + cap);
        *nb = (arena_block){.next = b, .cap = cap};
        p->arena = b = nb;
    }
    char *at = b->data + b->used;
    b->used += n;
    return at;
}

/* Empties the arena, keeping its newest block if it is small. */
static void arena_reset(resp_parser *p, int keep) {
    arena_block *b = p->arena;
    if (b && keep && b->cap <= ARENA_KEEP) {
        b->used = 0;
        b = b->next;
        p->arena->next = NULL;
    } else {
        p->arena = NULL;
    }
    while (b) {
        arena_block *next = b->next;
        free(b);
        b = next;
    }
}

static void free_arg(resp_arg *a) {
    if (!a->external && !a->pooled) free(a->ptr);
}

void resp_arg_replace(resp_arg *a, char *ptr) {
    free_arg(a);
    a->ptr = ptr;
    a->external = 1;
    a->pooled = 0;
}

static void free_args(resp_parser *p) {
    for (int i = 0; i < p->argc; i++) free_arg(&p->argv[i]);
    p->argc = 0;
    arena_reset(p, 1);
}

static void drop_bulk(resp_parser *p) {
    if (p->bulk.ptr) free_arg(&p->bulk);
    memset(&p->bulk, 0, sizeof p->bulk);
    p->bulkgot = p->bulkcap = 0;
    p->crlfgot = 0;
    p->discard = 0;
}

void resp_parser_reset(resp_parser *p) {
    free_args(p);
    drop_bulk(p);
    p->linelen = 0;
    p->mbtotal = 0;
    p->is_inline = 0;
    if (p->state != ST_ERROR) p->state = ST_IDLE;
}

void resp_parser_free(resp_parser *p) {
    if (!p) return;
    drop_bulk(p);
    free_args(p);
    arena_reset(p, 0);
    free(p->argv);
    free(p->line);
    free(p->scratch);
    free(p);
}

void resp_parser_set_bulk_dest(resp_parser *p, resp_bulk_dest_fn *fn, void *ctx) {
    p->dest = fn;
    p->dest_ctx = ctx;
}

/* argv grows as arguments arrive; the announced count only caps it. */
static void push_arg(resp_parser *p, resp_arg a) {
    if (p->argc == p->argcap) {
        long long want = p->argcap ? (long long)p->argcap * 2 : 8;
        if (p->mbtotal > 0 && want > p->mbtotal && p->mbtotal > p->argc)
            want = p->mbtotal;
        if (want > INT32_MAX) want = INT32_MAX;
        p->argv = xalloc_or_die(p->argv, (size_t)want * sizeof *p->argv);
        p->argcap = (int)want;
    }
    p->argv[p->argc++] = a;
}

static void reserve_argv(resp_parser *p, long long n) {
    if (n > ARGV_PREALLOC_MAX) n = ARGV_PREALLOC_MAX;
    if (n > p->argcap) {
        p->argv = xalloc_or_die(p->argv, (size_t)n * sizeof *p->argv);
        p->argcap = (int)n;
    }
}

/* ----------------------------------------------------------------- lines */

/* Finds the next line in buf[*pos..len), gathering it across feeds in
 * p->line. Returns 1 with *out, *outlen = the line without its '\n', 0 when
 * all input was taken and the line is still incomplete, -1 when the line
 * exceeds limit bytes. */
static int take_line(resp_parser *p, const char *buf, size_t len, size_t *pos,
                     size_t limit, const char **out, size_t *outlen) {
    const char *start = buf + *pos;
    size_t avail = len - *pos;
    const char *nl = memchr(start, '\n', avail);
    size_t chunk = nl ? (size_t)(nl - start) : avail;

    if (p->linelen + chunk > limit) return -1;
    if (nl && p->linelen == 0) {        /* whole line in this chunk: no copy */
        *out = start;
        *outlen = chunk;
        *pos += chunk + 1;
        return 1;
    }
    if (p->linelen + chunk > p->linecap) {
        size_t cap = p->linecap ? p->linecap : 64;
        while (cap < p->linelen + chunk) cap *= 2;
        p->line = xalloc_or_die(p->line, cap);
        p->linecap = cap;
    }
    memcpy(p->line + p->linelen, start, chunk);
    p->linelen += chunk;
    *pos += nl ? chunk + 1 : chunk;
    if (!nl) return 0;
    *out = p->line;
    *outlen = p->linelen;
    p->linelen = 0;                     /* caller uses it before the next take */
    return 1;
}

/* Strict decimal: optional '-', 1..19 digits, no overflow. */
static int parse_ll(const char *s, size_t n, long long *v) {
    int neg = 0;
    unsigned long long acc = 0;
    if (n && *s == '-') { neg = 1; s++; n--; }
    if (n == 0 || n > 19) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        acc = acc * 10 + (unsigned)(s[i] - '0');
    }
    if (acc > (unsigned long long)INT64_MAX) return -1;
    *v = neg ? -(long long)acc : (long long)acc;
    return 0;
}

/* A header line "<c><digits>\r" (the '\n' already removed). */
static int parse_header_number(const char *line, size_t n, long long *v) {
    if (n < 2 || line[n - 1] != '\r') return -1;
    return parse_ll(line + 1, n - 2, v);
}

/* ---------------------------------------------------------------- inline */

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static int hex_val(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

static char unescape(char c) {
    switch (c) {
    case 'n': return '\n';
    case 'r': return '\r';
    case 't': return '\t';
    case 'b': return '\b';
    case 'a': return '\a';
    default:  return c;
    }
}

/* Decodes one argument starting at s[*i] (not whitespace) into out, the
 * way sdssplitargs does. Returns its length, or -1 on unbalanced quotes. */
static long split_one(const char *s, size_t n, size_t *i, char *out) {
    size_t k = *i;
    long o = 0;
    char quote = 0;                      /* '"', '\'' or 0 */

    while (k < n) {
        char c = s[k];
        if (!quote) {
            if (is_space(c)) break;
            if (c == '"' || c == '\'') quote = c;
            else out[o++] = c;
            k++;
            continue;
        }
        if (c == quote) {                /* closing quote: space or end must follow */
            if (k + 1 < n && !is_space(s[k + 1])) return -1;
            quote = 0;
            k++;
            break;
        }
        if (quote == '"' && c == '\\' && k + 3 < n && s[k + 1] == 'x' &&
            hex_val(s[k + 2]) >= 0 && hex_val(s[k + 3]) >= 0) {
            out[o++] = (char)(hex_val(s[k + 2]) * 16 + hex_val(s[k + 3]));
            k += 4;
        } else if (quote == '"' && c == '\\' && k + 1 < n) {
            out[o++] = unescape(s[k + 1]);
            k += 2;
        } else if (quote == '\'' && c == '\\' && k + 1 < n && s[k + 1] == '\'') {
            out[o++] = '\'';
            k += 2;
        } else {
            out[o++] = c;
            k++;
        }
    }
    if (quote) return -1;
    *i = k;
    return o;
}

/* Splits a complete inline line into argv. Returns 0 or -1 (error set). */
static int parse_inline_line(resp_parser *p, const char *s, size_t n) {
    if (n && s[n - 1] == '\r') n--;
    if (n + 1 > p->scratchcap) {
        p->scratch = xalloc_or_die(p->scratch, n + 1);
        p->scratchcap = n + 1;
    }
    size_t i = 0;
    for (;;) {
        while (i < n && is_space(s[i])) i++;
        if (i == n) return 0;
        long alen = split_one(s, n, &i, p->scratch);
        if (alen < 0) {
            set_error(p, "Protocol error: unbalanced quotes in request");
            return -1;
        }
        resp_arg a = {.ptr = xalloc_or_die(NULL, (size_t)alen + 1), .len = (size_t)alen};
        memcpy(a.ptr, p->scratch, (size_t)alen);
        a.ptr[alen] = '\0';
        push_arg(p, a);
    }
}

/* ------------------------------------------------------------------ bulk */

/* Parser-owned buffers for big claims start at 64 KiB and double as data
 * arrives, never beyond the claimed length (+1 for the NUL). */
static void grow_bulk(resp_parser *p, size_t need) {
    size_t full = p->bulk.len + 1;
    size_t cap = p->bulkcap ? p->bulkcap : BULK_ONESHOT_MAX;
    while (cap < need && cap < full) cap = cap > full / 2 ? full : cap * 2;
    if (cap > full) cap = full;
    if (cap <= p->bulkcap) return;
    p->bulk.ptr = xalloc_or_die(p->bulk.ptr, cap);
    p->bulkcap = cap;
}

static void start_bulk(resp_parser *p, size_t len) {
    memset(&p->bulk, 0, sizeof p->bulk);
    p->bulk.len = len;
    p->bulkgot = 0;
    p->bulkcap = 0;
    p->crlfgot = 0;
    void *dst = p->dest ? p->dest(p->dest_ctx, p->argv, p->argc, (int)p->mbtotal, len) : NULL;
    if (dst == RESP_BULK_DISCARD) {
        p->discard = 1;
        p->bulk.ptr = arena_alloc(p, 1);   /* the argument reads as "" */
        p->bulk.pooled = 1;
        p->bulkcap = 1;
    } else if (dst) {
        p->bulk.ptr = dst;
        p->bulk.external = 1;
        p->bulkcap = len;
    } else if (len <= ARENA_ARG_MAX) {
        p->bulk.ptr = arena_alloc(p, len + 1);
        p->bulk.pooled = 1;
        p->bulkcap = len + 1;
    } else if (len <= BULK_ONESHOT_MAX) {
        p->bulk.ptr = xalloc_or_die(NULL, len + 1);
        p->bulkcap = len + 1;
    } else {
        grow_bulk(p, BULK_ONESHOT_MAX);
    }
    p->state = len ? ST_BULK_BODY : ST_BULK_CRLF;
}

/* Payload bytes [bulkgot, bulkgot+n) are in place. */
static void bulk_advance(resp_parser *p, size_t n) {
    p->bulkgot += n;
    if (p->bulkgot == p->bulk.len) p->state = ST_BULK_CRLF;
}

static void bulk_copy(resp_parser *p, const char *buf, size_t len, size_t *pos) {
    size_t n = p->bulk.len - p->bulkgot;
    if (n > len - *pos) n = len - *pos;
    if (p->discard) {
        *pos += n;
        bulk_advance(p, n);
        return;
    }
    if (!p->bulk.external && p->bulkgot + n + 1 > p->bulkcap)
        grow_bulk(p, p->bulkgot + n + 1);
    memcpy(p->bulk.ptr + p->bulkgot, buf + *pos, n);
    *pos += n;
    bulk_advance(p, n);
}

/* Returns 1 when the CRLF completed the argument, 0 for more input, -1 on error. */
static int bulk_crlf(resp_parser *p, const char *buf, size_t len, size_t *pos) {
    static const char crlf[2] = { '\r', '\n' };
    while (p->crlfgot < 2 && *pos < len) {
        if (buf[*pos] != crlf[p->crlfgot]) {
            set_error(p, "Protocol error: bulk not followed by CRLF");
            return -1;
        }
        p->crlfgot++;
        (*pos)++;
    }
    if (p->crlfgot < 2) return 0;
    if (p->discard) p->bulk.len = 0;
    p->discard = 0;
    if (!p->bulk.external) p->bulk.ptr[p->bulk.len] = '\0';
    push_arg(p, p->bulk);
    memset(&p->bulk, 0, sizeof p->bulk);
    p->bulkgot = p->bulkcap = 0;
    p->crlfgot = 0;
    p->state = p->argc == p->mbtotal ? ST_DONE : ST_BULK_HDR;
    return 1;
}

/* ------------------------------------------------------------------ feed */

static void on_mb_count(resp_parser *p, const char *line, size_t n) {
    long long count;
    if (parse_header_number(line, n, &count) < 0) {
        set_error(p, "Protocol error: invalid multibulk length");
        return;
    }
    if (count > p->lim.max_multibulk_len) {
        over_limit(p, "multibulk");
        return;
    }
    if (count <= 0) {                   /* "*0" / "*-1": nothing to run */
        p->state = ST_IDLE;
        return;
    }
    p->mbtotal = count;
    reserve_argv(p, count);
    p->state = ST_BULK_HDR;
}

static void on_bulk_header(resp_parser *p, const char *line, size_t n) {
    long long blen;
    if (parse_header_number(line, n, &blen) < 0 || blen < 0) {
        set_error(p, "Protocol error: invalid bulk length");
        return;
    }
    if (blen > p->lim.max_bulk_len) {
        over_limit(p, "bulk");
        return;
    }
    start_bulk(p, (size_t)blen);
}

/* One state step over buf[*pos..]; returns -1 when waiting for input. */
static int step(resp_parser *p, const char *buf, size_t len, size_t *pos) {
    const char *line;
    size_t n;
    int r;

    switch (p->state) {
    case ST_IDLE:
        p->is_inline = buf[*pos] != '*';
        p->state = p->is_inline ? ST_INLINE : ST_MB_COUNT;
        return 0;
    case ST_INLINE:
        r = take_line(p, buf, len, pos, p->lim.max_inline_len, &line, &n);
        if (r < 0) set_error(p, "Protocol error: too big inline request");
        else if (r > 0 && parse_inline_line(p, line, n) == 0)
            p->state = p->argc ? ST_DONE : ST_IDLE;
        return r == 0 ? -1 : 0;
    case ST_MB_COUNT:
        r = take_line(p, buf, len, pos, RESP_MAX_COUNT_LINE - 1, &line, &n);
        if (r < 0) set_error(p, "Protocol error: too big mbulk count string");
        else if (r > 0) on_mb_count(p, line, n);
        return r == 0 ? -1 : 0;
    case ST_BULK_HDR:
        if (p->linelen == 0 && buf[*pos] != '$') {
            set_error(p, "Protocol error: expected '$', got '%c'", buf[*pos]);
            return 0;
        }
        r = take_line(p, buf, len, pos, RESP_MAX_COUNT_LINE - 1, &line, &n);
        if (r < 0) set_error(p, "Protocol error: too big bulk count string");
        else if (r > 0) on_bulk_header(p, line, n);
        return r == 0 ? -1 : 0;
    case ST_BULK_BODY:
        bulk_copy(p, buf, len, pos);
        return 0;
    case ST_BULK_CRLF:
        return bulk_crlf(p, buf, len, pos) == 0 ? -1 : 0;
    default:
        return 0;
    }
}

resp_status resp_parser_feed(resp_parser *p, const char *buf, size_t len,
                             size_t *consumed) {
    size_t pos = 0;
    if (p->state == ST_DONE) resp_parser_reset(p);
    while (p->state != ST_ERROR && p->state != ST_DONE && pos < len) {
        if (step(p, buf, len, &pos) < 0) break;
    }
    *consumed = pos;
    if (p->state == ST_ERROR) return RESP_ERROR;
    return p->state == ST_DONE ? RESP_COMMAND : RESP_AGAIN;
}

/* -------------------------------------------------------------- accessors */

int resp_parser_argc(const resp_parser *p) { return p->argc; }
resp_arg *resp_parser_argv(resp_parser *p) { return p->argv; }
int resp_parser_is_inline(const resp_parser *p) { return p->is_inline; }
const char *resp_parser_errstr(const resp_parser *p) { return p->err; }

int resp_parser_in_progress(const resp_parser *p) {
    return p->state != ST_IDLE && p->state != ST_DONE && p->state != ST_ERROR;
}

size_t resp_parser_direct_span(resp_parser *p, char **dst) {
    if (p->state != ST_BULK_BODY || p->discard) return 0;
    size_t want = p->bulk.len - p->bulkgot;
    if (!p->bulk.external) {
        if (p->bulkgot + 1 >= p->bulkcap) grow_bulk(p, p->bulkgot + 2);
        size_t room = p->bulkcap - 1 - p->bulkgot;   /* keep a byte for the NUL */
        if (want > room) want = room;
    }
    *dst = p->bulk.ptr + p->bulkgot;
    return want;
}

size_t resp_parser_bulk_left(const resp_parser *p) {
    return p->state == ST_BULK_BODY ? p->bulk.len - p->bulkgot : 0;
}

void resp_parser_direct_advance(resp_parser *p, size_t n) {
    if (p->state != ST_BULK_BODY || n > p->bulk.len - p->bulkgot) return;
    bulk_advance(p, n);
}

/* ------------------------------------------------------------- look-ahead */

/* "<c><digits>\r\n" at buf[*pos]: its number (at most 18 digits), *pos
 * moved past it; -1 for anything else or a line not whole in buf. */
static long long peek_header(const char *buf, size_t len, size_t *pos, char c) {
    size_t i = *pos, start;
    long long v = 0;
    if (i >= len || buf[i] != c) return -1;
    for (start = ++i; i < len && i - start < 18 && buf[i] >= '0' && buf[i] <= '9'; i++)
        v = v * 10 + (buf[i] - '0');
    if (i == start || len - i < 2 || buf[i] != '\r' || buf[i + 1] != '\n') return -1;
    *pos = i + 2;
    return v;
}

size_t resp_peek_keys(const char *buf, size_t len, resp_span *out, size_t max) {
    size_t pos = 0, n = 0;
    while (n < max) {
        long long argc = peek_header(buf, len, &pos, '*');
        if (argc < 1) break;
        /* Each argument takes at least "$0\r\n\r\n": a huge count ends
         * with the buffer. */
        for (long long a = 0; a < argc; a++) {
            long long blen = peek_header(buf, len, &pos, '$');
            if (blen < 0 || (unsigned long long)blen > len - pos || len - pos - (size_t)blen < 2) return n;
            if (a == 1) out[n] = (resp_span){buf + pos, (size_t)blen};
            pos += (size_t)blen + 2;
        }
        if (argc >= 2) n++;
    }
    return n;
}
