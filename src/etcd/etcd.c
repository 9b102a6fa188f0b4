/* etcd/etcd.c - see etcd.h: the v3 calls moonkv elects and resolves with. */
#include "etcd/etcd.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "etcd/http.h"

typedef struct endpoint {
    char host[128];
    int port;
} endpoint;

struct etcd_client {
    endpoint ep[ETCD_MAX_ENDPOINTS];
    int nep;
    int last_ok;      /* the endpoint that answered last: tried first */
    int timeout_ms;
};

/* ---- endpoints ---- */

static int parse_endpoint(const char *s, size_t len, endpoint *ep) {
    char one[160];
    if (len >= sizeof one) return -1;
    memcpy(one, s, len);
    one[len] = '\0';
    const char *p = one;
    if (strncmp(p, "http://", 7) == 0) p += 7;
    else if (strstr(p, "://")) return -1;   /* https and others: not spoken here */
    char *slash = strchr(p, '/');
    if (slash) *slash = '\0';
    return parse_hostport(p, ep->host, sizeof ep->host, &ep->port);
}

etcd_client *etcd_create(const char *endpoints, int timeout_ms, char *err, size_t errlen) {
    etcd_client *ec = xcalloc(1, sizeof *ec);
    ec->timeout_ms = timeout_ms > 0 ? timeout_ms : 1000;
    for (const char *p = endpoints; p && *p;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (len > 0) {
            if (ec->nep == ETCD_MAX_ENDPOINTS || parse_endpoint(p, len, &ec->ep[ec->nep]) != 0) {
                snprintf(err, errlen, "bad etcd endpoint '%.*s' (want http://host:port, at most %d)",
                         (int)(len > 100 ? 100 : len), p, ETCD_MAX_ENDPOINTS);
                free(ec);
                return NULL;
            }
            ec->nep++;
        }
        p = comma ? comma + 1 : p + len;
    }
    if (ec->nep == 0) {
        snprintf(err, errlen, "no etcd endpoint given");
        free(ec);
        return NULL;
    }
    return ec;
}

void etcd_free(etcd_client *ec) { free(ec); }

/* ---- base64 (standard alphabet, padded) ---- */

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode_len(const char *s, size_t len) {
    size_t o = 0;
    char *out = xmalloc(4 * ((len + 2) / 3) + 1);
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)(unsigned char)s[i] << 16;
        if (i + 1 < len) v |= (uint32_t)(unsigned char)s[i + 1] << 8;
        if (i + 2 < len) v |= (unsigned char)s[i + 2];
        out[o++] = b64chars[(v >> 18) & 63];
        out[o++] = b64chars[(v >> 12) & 63];
        out[o++] = i + 1 < len ? b64chars[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? b64chars[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

static int b64_val(char ch) {
    const char *p = ch ? strchr(b64chars, ch) : NULL;
    return p ? (int)(p - b64chars) : -1;
}

/* Decode s into out[cap] with a NUL; -1 if malformed or too long. */
static int b64_decode(const char *s, char *out, size_t cap) {
    size_t o = 0, len = strlen(s);
    if (len % 4) return -1;
    for (size_t i = 0; i < len; i += 4) {
        int a = b64_val(s[i]), b = b64_val(s[i + 1]);
        int c = s[i + 2] == '=' ? 0 : b64_val(s[i + 2]);
        int d = s[i + 3] == '=' ? 0 : b64_val(s[i + 3]);
        if (a < 0 || b < 0 || c < 0 || d < 0) return -1;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
        int n = s[i + 2] == '=' ? 1 : s[i + 3] == '=' ? 2 : 3;
        if (o + (size_t)n >= cap) return -1;
        out[o++] = (char)(v >> 16);
        if (n > 1) out[o++] = (char)(v >> 8);
        if (n > 2) out[o++] = (char)v;
    }
    out[o] = '\0';
    return memchr(out, '\0', o) ? -1 : 0;   /* our values are text */
}

/* ---- JSON helpers ---- */

/* A 64-bit field: the gateway sends int64 as a decimal string, and omits
 * fields that are zero. */
static int64_t json_i64(const cJSON *obj, const char *name) {
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(obj, name);
    if (cJSON_IsString(f)) return strtoll(f->valuestring, NULL, 10);
    if (cJSON_IsNumber(f)) return (int64_t)f->valuedouble;
    return 0;
}

static void add_i64(cJSON *obj, const char *name, int64_t v) {
    char num[24];
    snprintf(num, sizeof num, "%" PRId64, v);
    cJSON_AddStringToObject(obj, name, num);
}

static void add_b64_len(cJSON *obj, const char *name, const char *s, size_t len) {
    char *enc = b64_encode_len(s, len);
    cJSON_AddStringToObject(obj, name, enc);
    free(enc);
}

static void add_b64(cJSON *obj, const char *name, const char *s) { add_b64_len(obj, name, s, strlen(s)); }

/* POST req (consumed) to path on the first endpoint that answers; the
 * parsed reply or NULL with err. A non-200 reply is an error carrying
 * etcd's message. */
static cJSON *call(etcd_client *ec, const char *path, cJSON *req, char *err, size_t errlen) {
    char *body = cJSON_PrintUnformatted(req);
    cJSON_Delete(req);
    if (!body) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    cJSON *reply = NULL;
    for (int t = 0; t < ec->nep && !reply; t++) {
        int i = (ec->last_ok + t) % ec->nep;
        int status;
        char *out;
        size_t outlen;
        if (http_post(ec->ep[i].host, ec->ep[i].port, path, body, ec->timeout_ms, ETCD_MAX_REPLY,
                      &status, &out, &outlen, err, errlen) != 0)
            continue;
        reply = cJSON_ParseWithLength(out, outlen);
        if (!reply) {
            snprintf(err, errlen, "etcd %s: reply is not JSON", path);
        } else if (status != 200) {
            const cJSON *m = cJSON_GetObjectItemCaseSensitive(reply, "message");
            if (!cJSON_IsString(m)) m = cJSON_GetObjectItemCaseSensitive(reply, "error");
            snprintf(err, errlen, "etcd %s: HTTP %d: %.120s", path, status,
                     cJSON_IsString(m) ? m->valuestring : "no message");
            cJSON_Delete(reply);
            reply = NULL;
        } else {
            ec->last_ok = i;
        }
        free(out);
    }
    free(body);
    return reply;
}

/* ---- leases ---- */

int etcd_lease_grant(etcd_client *ec, int ttl_s, int64_t *id, char *err, size_t errlen) {
    cJSON *req = cJSON_CreateObject();
    add_i64(req, "TTL", ttl_s);
    cJSON *r = call(ec, "/v3/lease/grant", req, err, errlen);
    if (!r) return -1;
    *id = json_i64(r, "ID");
    cJSON_Delete(r);
    if (*id == 0) {
        snprintf(err, errlen, "etcd lease grant: no lease id in the reply");
        return -1;
    }
    return 0;
}

int etcd_lease_keepalive(etcd_client *ec, int64_t id, int64_t *ttl_left, char *err, size_t errlen) {
    cJSON *req = cJSON_CreateObject();
    add_i64(req, "ID", id);
    cJSON *r = call(ec, "/v3/lease/keepalive", req, err, errlen);
    if (!r) return -1;
    /* A stream of one message: {"result": {...}} (or an "error"). */
    const cJSON *res = cJSON_GetObjectItemCaseSensitive(r, "result");
    int rc = 0;
    if (!cJSON_IsObject(res)) {
        snprintf(err, errlen, "etcd lease keepalive: no result in the reply");
        rc = -1;
    } else {
        *ttl_left = json_i64(res, "TTL");
    }
    cJSON_Delete(r);
    return rc;
}

int etcd_lease_revoke(etcd_client *ec, int64_t id, char *err, size_t errlen) {
    cJSON *req = cJSON_CreateObject();
    add_i64(req, "ID", id);
    cJSON *r = call(ec, "/v3/lease/revoke", req, err, errlen);
    cJSON_Delete(r);
    return r ? 0 : -1;
}

/* ---- keys ---- */

static cJSON *put_request(const char *key, const char *val, int64_t lease) {
    cJSON *p = cJSON_CreateObject();
    add_b64(p, "key", key);
    add_b64(p, "value", val);
    if (lease) add_i64(p, "lease", lease);
    return p;
}

int etcd_put(etcd_client *ec, const char *key, const char *val, int64_t lease, char *err,
             size_t errlen) {
    cJSON *r = call(ec, "/v3/kv/put", put_request(key, val, lease), err, errlen);
    cJSON_Delete(r);
    return r ? 0 : -1;
}

/* The first kv of a range reply (or of a txn's response_range). */
static int first_kv(const cJSON *range, int *found, char *val, size_t valcap, int64_t *create_rev,
                    char *err, size_t errlen) {
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(range, "kvs");
    const cJSON *kv = cJSON_IsArray(kvs) ? cJSON_GetArrayItem(kvs, 0) : NULL;
    *found = kv != NULL;
    if (!kv) return 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
    if (!cJSON_IsString(v)) {
        val[0] = '\0';   /* an empty value is omitted */
    } else if (b64_decode(v->valuestring, val, valcap) != 0) {
        snprintf(err, errlen, "etcd: value malformed or longer than %zu bytes", valcap - 1);
        return -1;
    }
    *create_rev = json_i64(kv, "create_revision");
    return 0;
}

int etcd_get(etcd_client *ec, const char *key, int *found, char *val, size_t valcap,
             int64_t *create_rev, char *err, size_t errlen) {
    cJSON *req = cJSON_CreateObject();
    add_b64(req, "key", key);
    cJSON *r = call(ec, "/v3/kv/range", req, err, errlen);
    if (!r) return -1;
    int rc = first_kv(r, found, val, valcap, create_rev, err, errlen);
    cJSON_Delete(r);
    return rc;
}

/* A txn request whose one compare is: key's value is val or, with val
 * NULL, key's create revision is rev (0: the key does not exist). */
static cJSON *txn_if(const char *key, int64_t rev, const char *val) {
    cJSON *req = cJSON_CreateObject();
    cJSON *cmp = cJSON_CreateObject();
    add_b64(cmp, "key", key);
    cJSON_AddStringToObject(cmp, "result", "EQUAL");
    cJSON_AddStringToObject(cmp, "target", val ? "VALUE" : "CREATE");
    if (val) add_b64(cmp, "value", val);
    else add_i64(cmp, "create_revision", rev);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "compare"), cmp);
    return req;
}

static cJSON *txn_if_created(const char *key, int64_t rev) { return txn_if(key, rev, NULL); }

int etcd_create_key(etcd_client *ec, const char *key, const char *val, int64_t lease, int *won,
                    char *holder, size_t holdercap, int64_t *create_rev, char *err, size_t errlen) {
    cJSON *req = txn_if_created(key, 0);
    cJSON *ok = cJSON_CreateObject();
    cJSON_AddItemToObject(ok, "request_put", put_request(key, val, lease));
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "success"), ok);
    cJSON *fail = cJSON_CreateObject();
    cJSON *range = cJSON_AddObjectToObject(fail, "request_range");
    add_b64(range, "key", key);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "failure"), fail);

    cJSON *r = call(ec, "/v3/kv/txn", req, err, errlen);
    if (!r) return -1;
    int rc = 0;
    *won = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
    if (*won) {
        /* Our put made the key: its create revision is the txn's. */
        *create_rev = json_i64(cJSON_GetObjectItemCaseSensitive(r, "header"), "revision");
        snprintf(holder, holdercap, "%s", val);
    } else {
        const cJSON *resp = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(r, "responses"), 0);
        int found = 0;
        rc = first_kv(cJSON_GetObjectItemCaseSensitive(resp, "response_range"), &found, holder,
                      holdercap, create_rev, err, errlen);
        if (rc == 0 && !found) holder[0] = '\0', *create_rev = 0;   /* gone in between */
    }
    if (rc == 0 && *won && *create_rev == 0) {
        snprintf(err, errlen, "etcd txn: no revision in the reply");
        rc = -1;
    }
    cJSON_Delete(r);
    return rc;
}

/* One request (op, e.g. "request_put") run only if req's compare holds:
 * *ok says whether it ran. */
static int txn_then(etcd_client *ec, cJSON *req, const char *op, cJSON *request, int *ok, char *err,
                    size_t errlen) {
    cJSON *then = cJSON_CreateObject();
    cJSON_AddItemToObject(then, op, request);
    cJSON_AddItemToArray(cJSON_AddArrayToObject(req, "success"), then);
    cJSON *r = call(ec, "/v3/kv/txn", req, err, errlen);
    if (!r) return -1;
    *ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "succeeded"));
    cJSON_Delete(r);
    return 0;
}

/* op run only if guard's create revision is guard_rev. */
static int guarded(etcd_client *ec, const char *op, cJSON *request, const char *guard,
                   int64_t guard_rev, int *ok, char *err, size_t errlen) {
    return txn_then(ec, txn_if_created(guard, guard_rev), op, request, ok, err, errlen);
}

int etcd_put_guarded(etcd_client *ec, const char *key, const char *val, const char *guard,
                     int64_t guard_rev, int *ok, char *err, size_t errlen) {
    return guarded(ec, "request_put", put_request(key, val, 0), guard, guard_rev, ok, err, errlen);
}

int etcd_put_if_value(etcd_client *ec, const char *key, const char *val, const char *expect, int *ok,
                      char *err, size_t errlen) {
    return txn_then(ec, txn_if(key, 0, expect), "request_put", put_request(key, val, 0), ok, err, errlen);
}

int etcd_delete_guarded(etcd_client *ec, const char *key, const char *guard, int64_t guard_rev,
                        int *ok, char *err, size_t errlen) {
    cJSON *del = cJSON_CreateObject();
    add_b64(del, "key", key);
    return guarded(ec, "request_delete_range", del, guard, guard_rev, ok, err, errlen);
}

#define LIST_PAGE 256   /* keys per range request: a page stays far below ETCD_MAX_REPLY */

/* The keys (and values, unless keys_only) of one page of a range reply,
 * to each; the last key into last[ETCD_KEY_MAX]; how many, or -1 with err. */
static int list_page(const cJSON *r, int keys_only, etcd_each_kv *each, void *ctx, char *last, char *err,
                     size_t errlen) {
    const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(r, "kvs"), *kv;
    char val[ETCD_KEY_MAX];
    int n = 0;
    cJSON_ArrayForEach(kv, kvs) {
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
        if (!cJSON_IsString(k) || b64_decode(k->valuestring, last, ETCD_KEY_MAX) != 0) {
            snprintf(err, errlen, "etcd range: a key is malformed or longer than %d bytes", ETCD_KEY_MAX - 1);
            return -1;
        }
        val[0] = '\0';   /* an empty value is omitted; a long one is not ours: passed as empty */
        if (!keys_only && cJSON_IsString(v) && b64_decode(v->valuestring, val, sizeof val) != 0) val[0] = '\0';
        each(last, val, ctx);
        n++;
    }
    return n;
}

static int list_range(etcd_client *ec, const char *prefix, int keys_only, etcd_each_kv *each, void *ctx,
                      char *err, size_t errlen) {
    size_t plen = strlen(prefix);
    if (plen == 0 || plen >= ETCD_KEY_MAX || (unsigned char)prefix[plen - 1] == 0xff) {
        snprintf(err, errlen, "etcd range: bad prefix");
        return -1;
    }
    char end[ETCD_KEY_MAX], from[ETCD_KEY_MAX + 1];
    memcpy(end, prefix, plen + 1);
    end[plen - 1]++;   /* every key starting with prefix sorts below */
    memcpy(from, prefix, plen + 1);
    size_t flen = plen;
    for (;;) {
        cJSON *req = cJSON_CreateObject();
        add_b64_len(req, "key", from, flen);
        add_b64(req, "range_end", end);
        add_i64(req, "limit", LIST_PAGE);
        if (keys_only) cJSON_AddTrueToObject(req, "keys_only");
        cJSON *r = call(ec, "/v3/kv/range", req, err, errlen);
        if (!r) return -1;
        int n = list_page(r, keys_only, each, ctx, from, err, errlen);
        int more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(r, "more"));
        cJSON_Delete(r);
        if (n < 0) return -1;
        if (!more || n == 0) return 0;
        flen = strlen(from) + 1;   /* the next page starts just after the last key: key "\0" */
    }
}

typedef struct keys_only_ctx {
    void (*each)(const char *key, void *ctx);
    void *ctx;
} keys_only_ctx;

static void key_of(const char *key, const char *val, void *ctx) {
    (void)val;
    keys_only_ctx *k = ctx;
    k->each(key, k->ctx);
}

int etcd_list_keys(etcd_client *ec, const char *prefix, void (*each)(const char *key, void *ctx),
                   void *ctx, char *err, size_t errlen) {
    keys_only_ctx k = {each, ctx};
    return list_range(ec, prefix, 1, key_of, &k, err, errlen);
}

int etcd_list(etcd_client *ec, const char *prefix, etcd_each_kv *each, void *ctx, char *err, size_t errlen) {
    return list_range(ec, prefix, 0, each, ctx, err, errlen);
}

/* ---- the leader key ---- */

int etcd_cluster_key(const char *cluster, const char *name, char *buf, size_t len) {
    int n = snprintf(buf, len, "/moonkv/%s/%s", cluster && *cluster ? cluster : "moonkv", name);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

int etcd_leader_key(const char *cluster, char *buf, size_t len) {
    return etcd_cluster_key(cluster, "leader", buf, len);
}

int etcd_leader_lookup(etcd_client *ec, const char *cluster, int *found, char *addr,
                       size_t addrcap, int64_t *term, char *err, size_t errlen) {
    char key[ETCD_KEY_MAX];
    if (etcd_leader_key(cluster, key, sizeof key) != 0) {
        snprintf(err, errlen, "cluster name too long");
        return -1;
    }
    return etcd_get(ec, key, found, addr, addrcap, term, err, errlen);
}
