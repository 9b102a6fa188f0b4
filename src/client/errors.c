/* client/errors.c - MKV_E* codes: their texts, recording why a call
 * failed, and the mapping of the master's error replies (by their first
 * word, master/PROTOCOL.md) to codes. Apart from the rest of the client
 * so that decoders can be tested and fuzzed without a connection. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/client.h"

const char *mkv_strerror(int code) {
    switch (code) {
    case MKV_OK:          return "ok";
    case MKV_ENOTFOUND:   return "no such object";
    case MKV_EEXISTS:     return "key exists (objects are write-once)";
    case MKV_ENOSPACE:    return "no space in the cluster";
    case MKV_ENOREPLICAS: return "fewer live nodes than replicas";
    case MKV_EINVAL:      return "invalid argument";
    case MKV_ENOTREG:     return "buffer not in a registered region";
    case MKV_ETOOSMALL:   return "buffer smaller than the object";
    case MKV_ECONN:       return "connection failed";
    case MKV_EAUTH:       return "authentication refused";
    case MKV_EIO:         return "transfer failed on every path and replica";
    case MKV_ECORRUPT:    return "checksum mismatch on every replica";
    case MKV_ETIMEDOUT:   return "timed out";
    case MKV_EPROTO:      return "unexpected reply from the master";
    case MKV_ENOMEM:      return "out of memory";
    default:              return "unknown error";
    }
}

int mkv_fail(mkv_client *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err, sizeof c->err, fmt, ap);
    va_end(ap);
    return code;
}

int mkv_check_key(mkv_client *c, const void *key, size_t keylen) {
    if (!key || keylen == 0) return mkv_fail(c, MKV_EINVAL, "empty key");
    if (keylen > MKV_MAX_KEY_LEN)
        return mkv_fail(c, MKV_EINVAL, "key longer than %d bytes", MKV_MAX_KEY_LEN);
    return MKV_OK;
}

/* Error reply prefixes of the master (PROTOCOL.md) and our codes. */
static const struct { const char *prefix; int code; } error_map[] = {
    {"EXISTS", MKV_EEXISTS},
    {"NOSPACE", MKV_ENOSPACE},
    {"NOREPLICAS", MKV_ENOREPLICAS},
    {"NOAUTH", MKV_EAUTH},
    {"WRONGPASS", MKV_EAUTH},
    {"ERR no such key", MKV_ENOTFOUND},
    {"ERR no put in progress", MKV_ENOTFOUND},
    {"ERR put timed out", MKV_ETIMEDOUT},
    {"ERR unknown command", MKV_EPROTO},
    {"ERR", MKV_EINVAL},
};

int mkv_reply_error(mkv_client *c, const char *msg, size_t len) {
    int code = MKV_EPROTO;
    for (size_t i = 0; i < sizeof error_map / sizeof error_map[0]; i++) {
        size_t n = strlen(error_map[i].prefix);
        /* whole words only: "ERR" is not a prefix of "ERRATA" */
        if (len >= n && memcmp(msg, error_map[i].prefix, n) == 0 && (len == n || msg[n] == ' ')) {
            code = error_map[i].code;
            break;
        }
    }
    return mkv_fail(c, code, "master: %.*s", (int)(len > 200 ? 200 : len), msg);
}

int mkv_bad_reply(mkv_client *c, const char *what, const redisReply *r) {
    if (r && r->type == REDIS_REPLY_ERROR) return mkv_reply_error(c, r->str, r->len);
    return mkv_fail(c, MKV_EPROTO, "master: unexpected reply (type %d) to %s",
                    r ? r->type : -1, what);
}
