/* etcd/etcd.h - a small blocking etcd v3 client over its JSON gateway.
 *
 * Each call is one HTTP/1.1 POST to /v3/... (keys and values base64 as the
 * gateway wants, 64-bit numbers as decimal strings), on a fresh connection
 * that is closed after the reply. Endpoints are tried in the listed order
 * until one answers. Calls block for at most timeout_ms per endpoint, so
 * run them on a thread of their own, never on an event loop. Replies are
 * bounded (ETCD_MAX_REPLY); values longer than the caller's buffer are an
 * error, not a truncation.
 *
 * The leader helpers name the one key a moonkv cluster elects with:
 * /moonkv/<cluster>/leader, holding the leader's RESP address; its create
 * revision is the leader's term. Other keys of a cluster live beside it
 * (etcd_cluster_key). */
#ifndef MKV_ETCD_H
#define MKV_ETCD_H

#include <stddef.h>
#include <stdint.h>

#define ETCD_MAX_ENDPOINTS 8
#define ETCD_MAX_REPLY     (64u << 10)
#define ETCD_ERR_LEN       256
#define ETCD_KEY_MAX       256

typedef struct etcd_client etcd_client;

/* endpoints: "http://host:port[,http://host:port...]" ("http://" may be
 * left out). NULL with the reason in err for a bad list. */
etcd_client *etcd_create(const char *endpoints, int timeout_ms, char *err, size_t errlen);
void etcd_free(etcd_client *ec);   /* NULL is fine */

/* Every call below returns 0 on success and -1 with the reason in err. */
int etcd_lease_grant(etcd_client *ec, int ttl_s, int64_t *id, char *err, size_t errlen);
/* One keep-alive; *ttl_left is 0 when the lease is already gone. */
int etcd_lease_keepalive(etcd_client *ec, int64_t id, int64_t *ttl_left, char *err, size_t errlen);
int etcd_lease_revoke(etcd_client *ec, int64_t id, char *err, size_t errlen);
/* Put key=val, attached to lease (0: none). */
int etcd_put(etcd_client *ec, const char *key, const char *val, int64_t lease, char *err,
             size_t errlen);
/* *found 0 if the key is absent; otherwise its value (NUL-terminated into
 * val[valcap]) and create revision. */
int etcd_get(etcd_client *ec, const char *key, int *found, char *val, size_t valcap,
             int64_t *create_rev, char *err, size_t errlen);
/* Create key=val with lease only if the key does not exist (one txn,
 * compare create_revision == 0). *won says which; either way val/holder
 * and *create_rev describe the key after the txn (ours when won). */
int etcd_create_key(etcd_client *ec, const char *key, const char *val, int64_t lease, int *won,
                    char *holder, size_t holdercap, int64_t *create_rev, char *err, size_t errlen);

/* Put key=val (no lease) only if guard's create revision is guard_rev
 * (one txn): *ok 0 if it is not. A leader writes guarded by its leader
 * key's revision (its term), so a deposed one writes nothing. */
int etcd_put_guarded(etcd_client *ec, const char *key, const char *val, const char *guard,
                     int64_t guard_rev, int *ok, char *err, size_t errlen);
/* Put key=val (no lease) only if key's value is expect now, or, with
 * expect NULL, if key does not exist (one txn): *ok 0 if not. A
 * compare-and-swap for a value that carries its own version. */
int etcd_put_if_value(etcd_client *ec, const char *key, const char *val, const char *expect, int *ok,
                      char *err, size_t errlen);
/* Delete key, guarded the same way. */
int etcd_delete_guarded(etcd_client *ec, const char *key, const char *guard, int64_t guard_rev,
                        int *ok, char *err, size_t errlen);
/* Every key that starts with prefix, in order, to each (NUL-terminated,
 * shorter than ETCD_KEY_MAX), read in pages so no reply outgrows
 * ETCD_MAX_REPLY. */
int etcd_list_keys(etcd_client *ec, const char *prefix, void (*each)(const char *key, void *ctx),
                   void *ctx, char *err, size_t errlen);
/* The same with each key's value (NUL-terminated; "" if it is longer
 * than ETCD_KEY_MAX - 1 bytes or not text). */
typedef void etcd_each_kv(const char *key, const char *val, void *ctx);
int etcd_list(etcd_client *ec, const char *prefix, etcd_each_kv *each, void *ctx, char *err, size_t errlen);

/* "/moonkv/<cluster>/<name>" into buf; -1 if it does not fit. */
int etcd_cluster_key(const char *cluster, const char *name, char *buf, size_t len);
/* "/moonkv/<cluster>/leader" into buf; -1 if it does not fit. */
int etcd_leader_key(const char *cluster, char *buf, size_t len);
/* The current leader of a cluster: *found, its address and term. */
int etcd_leader_lookup(etcd_client *ec, const char *cluster, int *found, char *addr,
                       size_t addrcap, int64_t *term, char *err, size_t errlen);

#endif
