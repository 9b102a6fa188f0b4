/* client/errors.c - MKV_E* codes: their texts, recording why a call
 * failed, and the mapping of the master's error replies (by their first
 * word only: proto/status.h) to codes. Apart from the rest of the client
 * so that decoders can be tested and fuzzed without a connection. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "client/client.h"
#include "proto/status.h"

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
    case MKV_ETRYAGAIN:   return "the master is rebuilding: try again";
    case MKV_EFAULT:      return "buffer not readable or writable (bad address)";
    case MKV_EMOVED:      return "the key's slot belongs to another master group";
    default:              return "unknown error";
    }
}

/* Each thread's own: threads share a client, and a failure is told to
 * the thread whose call failed (as errno). */
static __thread char last_err[MKV_ERR_LEN];

const char *mkv_last_error(const mkv_client *c) {
    (void)c;
    return last_err;
}

int mkv_fail(mkv_client *c, int code, const char *fmt, ...) {
    va_list ap;
    (void)c;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof last_err, fmt, ap);
    va_end(ap);
    return code;
}

int mkv_check_key(mkv_client *c, const void *key, size_t keylen) {
    if (!key || keylen == 0) return mkv_fail(c, MKV_EINVAL, "empty key");
    if (keylen > PROTO_MAX_KEY_LEN)
        return mkv_fail(c, MKV_EINVAL, "key longer than %d bytes", PROTO_MAX_KEY_LEN);
    return MKV_OK;
}

/* The MKV_E* code of each status a master may answer with; a switch
 * without default, so a new status does not compile unmapped. */
static int status_code(proto_status st) {
    switch (st) {
    case PROTO_ERR: return MKV_EINVAL;
    case PROTO_EXISTS: return MKV_EEXISTS;
    case PROTO_NOTFOUND: return MKV_ENOTFOUND;
    case PROTO_TIMEDOUT: return MKV_ETIMEDOUT;
    case PROTO_NOSPACE: return MKV_ENOSPACE;
    case PROTO_NOREPLICAS: return MKV_ENOREPLICAS;
    case PROTO_NOAUTH:
    case PROTO_WRONGPASS: return MKV_EAUTH;
    case PROTO_READONLY: return MKV_ECONN;   /* not the leader: mkv_command retries */
    case PROTO_TRYAGAIN: return MKV_ETRYAGAIN;
    case PROTO_MOVED: return MKV_EMOVED;   /* groups: the router reads the slot map again */
    case PROTO_OK:          /* not an error word */
    case PROTO_NODEDEAD:    /* said to nodes only */
    case PROTO_IDINUSE:
    case PROTO_NSTATUS: return MKV_EPROTO;
    }
    return MKV_EPROTO;
}

int mkv_reply_error(mkv_client *c, const char *msg, size_t len) {
    int st = proto_status_of_reply(msg, len);
    int code = st < 0 ? MKV_EPROTO : status_code((proto_status)st);
    /* NOAUTH: the master has requirepass and this client gave none. */
    const char *hint = code == MKV_EAUTH && !c->password ? " (set mkv_options.password)" : "";
    return mkv_fail(c, code, "master: %.*s%s", (int)(len > 200 ? 200 : len), msg, hint);
}

int mkv_bad_reply(mkv_client *c, const char *what, const redisReply *r) {
    if (r && r->type == REDIS_REPLY_ERROR) return mkv_reply_error(c, r->str, r->len);
    return mkv_fail(c, MKV_EPROTO, "master: unexpected reply (type %d) to %s",
                    r ? r->type : -1, what);
}
