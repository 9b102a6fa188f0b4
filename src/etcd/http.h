/* etcd/http.h - one bounded HTTP/1.1 POST on a fresh connection.
 *
 * Enough HTTP for etcd's JSON gateway: a request with a JSON body and
 * "Connection: close", a reply read to EOF (or to its Content-Length)
 * with chunked transfer decoding, all within one deadline. */
#ifndef MKV_ETCD_HTTP_H
#define MKV_ETCD_HTTP_H

#include <stddef.h>

/* POST body to http://host:port/path. On success 0: the status code in
 * *status and the body, NUL-terminated, in a malloc'd *out (*outlen
 * bytes, at most maxlen). -1 with the reason in err. */
int http_post(const char *host, int port, const char *path, const char *body, int timeout_ms,
              size_t maxlen, int *status, char **out, size_t *outlen, char *err, size_t errlen);

/* Decode a chunked body in place; its new length, or -1 if malformed. */
long http_dechunk(char *buf, size_t len);

#endif
