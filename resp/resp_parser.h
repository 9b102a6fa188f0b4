/* resp/resp_parser.h - incremental parser for client requests.
 *
 * Knows nothing of sockets: feed bytes, take commands. Accepts RESP2
 * multibulk requests ("*2\r\n$3\r\nGET\r\n$1\r\na\r\n") and inline
 * commands ("GET a\r\n", as typed in telnet), split at any byte boundary.
 *
 * Zero-copy values: when a bulk header is parsed the parser asks the
 * bulk_dest callback for the payload's final home (e.g. an object's
 * memory in the segment); while that payload is arriving the caller may
 * read() from its socket straight into resp_parser_direct_span(). */
#ifndef MKV_RESP_PARSER_H
#define MKV_RESP_PARSER_H

#include <stddef.h>

#define RESP_PROTO_MAX_BULK_LEN   (512LL * 1024 * 1024) /* proto-max-bulk-len default */
#define RESP_MAX_MULTIBULK_LEN    (1024LL * 1024)       /* arguments per command */
#define RESP_MAX_INLINE_LEN       (64 * 1024)           /* an inline request line */
#define RESP_MAX_COUNT_LINE       32   /* "*<n>\r\n" / "$<n>\r\n" header bytes */
#define RESP_ERRSTR_LEN           128

typedef enum resp_status {
    RESP_ERROR = -1,   /* protocol error: reply "-ERR <errstr>" and close */
    RESP_AGAIN = 0,    /* every byte consumed, no whole command yet */
    RESP_COMMAND = 1   /* a command is ready in argv */
} resp_status;

typedef struct resp_arg {
    char *ptr;       /* payload; parser-owned ones are NUL terminated */
    size_t len;
    int external;    /* 1 if ptr came from bulk_dest (never freed here) */
    int pooled;      /* parser-owned in its arena of small arguments */
} resp_arg;

typedef struct resp_limits {
    long long max_bulk_len;       /* 0 = RESP_PROTO_MAX_BULK_LEN */
    long long max_multibulk_len;  /* 0 = RESP_MAX_MULTIBULK_LEN */
    size_t max_inline_len;        /* 0 = RESP_MAX_INLINE_LEN */
    /* NULL, or the word an over-limit count is reported with instead of
     * "invalid" ("unauthenticated": limits before AUTH). */
    const char *scope;
} resp_limits;

/* Asked once per bulk argument, after its "$<len>\r\n" header, with the
 * arguments parsed so far (argv[0..argi-1]) and the command's argc.
 * Return memory for len bytes to receive the payload, or NULL to let the
 * parser allocate it. Never asked for inline commands. */
typedef void *resp_bulk_dest_fn(void *ctx, const resp_arg *argv, int argi,
                                int argc, size_t len);
/* What bulk_dest returns for a payload nobody wants (a value refused at
 * its header): its bytes are read and dropped as they come, and the
 * argument then reads as empty. */
extern char resp_bulk_discard_mark;
#define RESP_BULK_DISCARD ((void *)&resp_bulk_discard_mark)

typedef struct resp_parser resp_parser;

resp_parser *resp_parser_create(const resp_limits *limits); /* NULL = defaults */
void resp_parser_free(resp_parser *p);
void resp_parser_set_bulk_dest(resp_parser *p, resp_bulk_dest_fn *fn, void *ctx);
/* Change the limits (e.g. after AUTH); they apply from the next header. */
void resp_parser_set_limits(resp_parser *p, const resp_limits *limits);

/* Parse from buf. *consumed is set to the bytes used (always all of them
 * on RESP_AGAIN). On RESP_COMMAND feed the rest again after handling the
 * command; on RESP_ERROR the parser is unusable. */
resp_status resp_parser_feed(resp_parser *p, const char *buf, size_t len,
                             size_t *consumed);

int resp_parser_argc(const resp_parser *p);
resp_arg *resp_parser_argv(resp_parser *p);
int resp_parser_is_inline(const resp_parser *p);  /* last command was inline */
/* Point a at bytes its caller keeps (a value moved into a put buffer):
 * what the parser owned of a is freed now, and ptr never will be. */
void resp_arg_replace(resp_arg *a, char *ptr);
/* Release the current command's arguments; call after handling each
 * RESP_COMMAND (feed does it too if forgotten). */
void resp_parser_reset(resp_parser *p);

/* While a bulk payload is being received: *dst gets where the next bytes
 * go and the return value is how many payload bytes may be written there
 * (0 when no payload is in progress). After writing n <= that many bytes
 * call resp_parser_direct_advance(p, n). */
size_t resp_parser_direct_span(resp_parser *p, char **dst);
void resp_parser_direct_advance(resp_parser *p, size_t n);
/* Payload bytes of the bulk in progress still to come (0 when none is). */
size_t resp_parser_bulk_left(const resp_parser *p);

/* 1 while a partial command is buffered (a client that hangs up now
 * leaves a half-written value behind). */
int resp_parser_in_progress(const resp_parser *p);

const char *resp_parser_errstr(const resp_parser *p); /* "Protocol error: ..." */

/* Looking ahead without parsing: the second argument (the key, for most
 * commands) of each whole multibulk command at the start of buf, up to
 * max of them, so a caller can prefetch what a pipelined batch will look
 * up before running it. Stops at the first command that is inline, not
 * whole in buf, or has a malformed header (the parser will say what is
 * wrong with it); commands of one argument are skipped. Only reads buf;
 * the spans point into it. Returns how many it filled. */
typedef struct resp_span {
    const char *ptr;
    size_t len;
} resp_span;
size_t resp_peek_keys(const char *buf, size_t len, resp_span *out, size_t max);

#endif
