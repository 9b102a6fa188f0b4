/* moonkv.h - libmoonkv, the C client of moonkv.
 *
 * The library asks the master where an object lives (control plane, RESP
 * over hiredis) and then moves the bytes itself, zero-copy, between the
 * caller's registered buffers and the memory nodes over the transfer
 * engine (RDMA verbs when a device exists, shared memory for nodes on
 * the same host, TCP otherwise).
 *
 * Threads: one mkv_client may be shared by every thread of a process,
 * and their calls run at once, not in turn: the client keeps one node
 * table, one set of registered buffers, one master connection (the
 * threads' commands pipelined on it) and one transfer engine (running up
 * to mkv_options.lanes transfers at once, each on a context of its own
 * connections to the nodes). A call holds a lane (its per-call state)
 * for its duration: a free one, a new one while fewer than lanes exist,
 * else it waits for one. mkv_close alone must not race other calls. This header is the blocking face; moonkv_async.h is the
 * asynchronous one, over the same client.
 *
 * Every call returns MKV_OK (0) or a negative MKV_E* code; the detailed
 * message of this thread's last failure is mkv_last_error(client). */
#ifndef MOONKV_H
#define MOONKV_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum {
    MKV_OK = 0,
    MKV_ENOTFOUND = -1,     /* no such object (or not yet complete) */
    MKV_EEXISTS = -2,       /* write-once: the key exists or is being written */
    MKV_ENOSPACE = -3,      /* the cluster has no room for it */
    MKV_ENOREPLICAS = -4,   /* fewer live nodes than replicas asked */
    MKV_EINVAL = -5,        /* bad argument */
    MKV_ENOTREG = -6,       /* buffer not inside a registered region */
    MKV_ETOOSMALL = -7,     /* get: buffer smaller than the object */
    MKV_ECONN = -8,         /* cannot reach the master or a node */
    MKV_EAUTH = -9,         /* password or cluster secret refused */
    MKV_EIO = -10,          /* transfer failed on every path and replica */
    MKV_ECORRUPT = -11,     /* checksum mismatch on every replica */
    MKV_ETIMEDOUT = -12,
    MKV_EPROTO = -13,       /* unexpected reply from the master */
    MKV_ENOMEM = -14,
    MKV_ETRYAGAIN = -15,    /* the master is rebuilding its table after a restart: retry soon */
    MKV_EFAULT = -16,       /* the caller's buffer cannot be read (put) or written (get): a bad
                             * pointer, the caller's own error; no node is blamed (see
                             * mkv_register_buffer for what is checked where) */
    MKV_EMOVED = -17        /* the key's slot belongs to another master group, and reading
                             * the slot map again did not settle it (mkv_options.groups) */
};

typedef struct mkv_client mkv_client;

typedef struct mkv_options {
    const char *master;          /* "host:port" of the master (default 127.0.0.1:7380) */
    const char *password;        /* master's requirepass, or NULL */
    const char *cluster_secret;  /* data-plane secret, or NULL for the default */
    const char *transport;       /* "auto" (default), "tcp", "shm", "rdma" */
    const char *data_addrs;      /* local addresses to send from, comma separated; NULL = any */
    int replicas;                /* default replica count for puts (default 1) */
    int timeout_ms;              /* per operation (default 5000) */
    /* Same-host nodes (shm): "map" (default) maps the node's segment and
     * copies through the mapping, checking capabilities in the client; for
     * clients the node's owner trusts (same user, same secret), since a
     * writable mapping can write anywhere in the segment. "fd": pread/
     * pwrite on the segment fd, the node verifying every request. */
    const char *shm_mode;
    /* Failover: with etcd set, master is ignored; the leader is read from
     * etcd and read again when its connection fails or it answers
     * READONLY (within timeout_ms per call). */
    const char *etcd;            /* "http://host:port[,...]", or NULL */
    const char *cluster_name;    /* the cluster's etcd prefix (default "moonkv") */
    /* Threads that copy a transfer's bytes through a same-host mapping
     * and sum large checksums, this client's calling thread included:
     * 0 (default) = by cores, up to 4; 1 = the calling thread alone. */
    int copy_threads;
    /* Calls that run at once on this client from different threads: each
     * holds a lane while it runs, and the engine runs as many transfers
     * at once, each on its own connections to a node. 0 (default) = 4,
     * at most 16. Lanes and transfer contexts open when first needed. */
    int lanes;
    /* Master groups (docs/SCALE.md "Master groups"): 1 = the key space of
     * cluster_name is cut into hash slots over master groups, read from
     * the slot map in etcd (etcd is needed): each key goes to its group's
     * leader, a batch is split by group and its parts run at once, and a
     * MOVED answer reads the map again. Pins and the async face are not
     * supported over groups yet (MKV_EINVAL). */
    int groups;
} mkv_options;

/* One object of a batch: key, caller's buffer, and the result. */
typedef struct mkv_obj {
    const void *key;
    size_t keylen;
    void *buf;          /* registered memory: the value (put) or where it goes (get) */
    size_t len;         /* put: value size; get: buffer size in, object size out */
    int status;         /* MKV_OK or MKV_E*, per object */
} mkv_obj;

void mkv_options_init(mkv_options *opt);
int mkv_connect(mkv_client **out, const mkv_options *opt);
void mkv_close(mkv_client *c);
/* Why this thread's last call failed (c may be NULL: after mkv_connect). */
const char *mkv_last_error(const mkv_client *c);
const char *mkv_strerror(int code);

/* Memory the transfer engine may read and write directly. Buffers passed
 * to put/get must lie inside a registered region. Registering reads the
 * whole buffer once (it is never written), so the first transfers from
 * it run at full speed: register long-lived buffers, once. Memory that
 * cannot be read (unmapped, PROT_NONE) is refused with MKV_EFAULT.
 *
 * A region that goes bad after registration (unmapped, protected, or a
 * get into read-only memory) fails its transfers with MKV_EFAULT over TCP
 * and over shm in fd mode (the kernel's copy says EFAULT), and no node is
 * suspected. Over shm in map mode this process copies through its own
 * mapping, as memcpy would: a bad pointer there faults (SIGSEGV) in the
 * caller, never in the node, and is never blamed on it. */
int mkv_register_buffer(mkv_client *c, void *addr, size_t len);
int mkv_unregister_buffer(mkv_client *c, void *addr);

/* replicas 0 = the client's default. */
int mkv_put(mkv_client *c, const void *key, size_t keylen, const void *buf, size_t len,
            int replicas);
/* Reads the whole object into buf (checksum verified); *len_out = size.
 * A get that fails may leave any bytes in buf (a key read before is
 * copied from its last place while the master is asked). */
int mkv_get(mkv_client *c, const void *key, size_t keylen, void *buf, size_t buflen,
            size_t *len_out);
/* As mkv_get when the size is not known yet, with one master round trip:
 * once the object is located, place(ctx, size) returns registered memory
 * of at least size bytes for it (NULL: the get fails with MKV_ENOMEM,
 * nothing read). *len_out = size. */
typedef void *mkv_place_fn(void *ctx, uint64_t size);
int mkv_get_placed(mkv_client *c, const void *key, size_t keylen, mkv_place_fn *place, void *ctx,
                   uint64_t *len_out);
/* One object of mkv_get_batch_placed: its memory is asked for once its
 * size is known. */
typedef struct mkv_pobj {
    const void *key;
    size_t keylen;
    mkv_place_fn *place;  /* place(ctx, size), as mkv_get_placed's; may run on another thread */
    void *ctx;
    void *buf;            /* out: what place gave */
    uint64_t len;         /* out: the object's size */
    int status;           /* MKV_OK or MKV_E*, per object */
} mkv_pobj;
/* mkv_get_placed for a batch: one master round trip per 4096 keys, then
 * the memory of each object found, then every transfer in one batch.
 * Over master groups the batch is split by group and the parts run at
 * once. MKV_OK when the batch ran (see each object's status). */
int mkv_get_batch_placed(mkv_client *c, mkv_pobj *objs, size_t n);
int mkv_size(mkv_client *c, const void *key, size_t keylen, uint64_t *size);
/* Size and CRC32C (crc32c(0, value, size)) of a complete object, from the
 * master alone: no bytes are read. crc may be NULL. */
int mkv_stat(mkv_client *c, const void *key, size_t keylen, uint64_t *size, uint32_t *crc);
int mkv_remove(mkv_client *c, const void *key, size_t keylen);
/* 1 if a complete object exists, 0 if not, or a negative error. */
int mkv_exists(mkv_client *c, const void *key, size_t keylen);

/* Batches: one master round trip for all keys, transfers in parallel.
 * Return MKV_OK when the batch ran (see each obj's status), or an error
 * that applies to all. */
int mkv_put_batch(mkv_client *c, mkv_obj *objs, size_t n, int replicas);
int mkv_get_batch(mkv_client *c, mkv_obj *objs, size_t n);
int mkv_exists_batch(mkv_client *c, mkv_obj *objs, size_t n, int *results);
/* Remove every key of objs (one MOON.MREMOVE per 4096 keys; over master
 * groups one per group, the groups' parts at once): objs[i].status
 * MKV_OK removed, MKV_ENOTFOUND none, or why not (MKV_ETRYAGAIN for a
 * pinned key, ...). */
int mkv_remove_batch(mkv_client *c, mkv_obj *objs, size_t n);

/* ---- the calls inference engines make ---- */

/* One piece of an object: len bytes of registered memory at buf. */
typedef struct mkv_iov {
    void *buf;
    size_t len;
} mkv_iov;

/* An object held in pieces (a KV page as one piece per layer, K and V
 * apart, out of one registered arena). Put: the value is the pieces in
 * order. Get: the object is read across them in order, each filled
 * before the next; their sum must be at least its size (else
 * MKV_ETOOSMALL, len = the size). Each piece moves straight between its
 * memory and its byte range of the object: no staging copy. */
typedef struct mkv_objv {
    const void *key;
    size_t keylen;
    const mkv_iov *iov;
    size_t niov;        /* 1 to 65536 */
    size_t len;         /* out: the object's size */
    int status;         /* MKV_OK or MKV_E*, per object: MKV_EEXISTS and
                           MKV_ENOSPACE told apart, as in every batch */
} mkv_objv;

/* mkv_put_batch / mkv_get_batch for objects held in pieces: one master
 * round trip per 4096 objects, every piece of the batch in one transfer
 * batch, checksums combined from the pieces'. */
int mkv_put_batchv(mkv_client *c, mkv_objv *objs, size_t n, int replicas);
int mkv_get_batchv(mkv_client *c, mkv_objv *objs, size_t n);

/* How many of objs' keys, from the first on, name complete objects: the
 * hit of a prefix lookup (MOON.PREFIX, one master round trip per 4096
 * keys; later chunks are asked only when every key before was found). */
int mkv_exists_prefix(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count);
/* The same, the hits pinned for pin_ms (1 to 600000): until mkv_unpin or
 * that time, the master refuses to remove them (MKV_ETRYAGAIN) and never
 * collects them, so they are there when the caller loads them. *pin: 0 to
 * have an id drawn (set on return, also when nothing was found), or an
 * earlier pin's id to add these hits to it. At most 65,536 keys pinned
 * per master connection (MKV_EINVAL past it, nothing pinned). */
int mkv_exists_prefix_pin(mkv_client *c, const mkv_obj *objs, size_t n, uint32_t pin_ms, uint64_t *pin,
                          size_t *count);
/* Release a pin; *keys (may be NULL) = how many keys it held, 0 if it
 * had expired or never pinned anything. */
int mkv_unpin(mkv_client *c, uint64_t pin, size_t *keys);

/* Bytes [off, off + len) of an object into buf (registered); *got = how
 * many (fewer at the object's end, 0 from it on). Checked per slice when
 * the object keeps slice CRCs (objects over 4 MiB written by mkv_put or a
 * batch put): only the slices the range touches are read, their
 * parts outside it into a scratch buffer of the client. Otherwise the
 * whole object is read, the rest into that scratch, and checked whole. */
int mkv_get_range(mkv_client *c, const void *key, size_t keylen, uint64_t off, void *buf, size_t len,
                  size_t *got);

/* Remove every complete object (MOON.FLUSH); *removed = how many (may
 * be NULL). */
int mkv_remove_all(mkv_client *c, uint64_t *removed);

/* Transfer-engine counters since connect: value bytes by transport,
 * slices retried on another path, reads failed over to another replica;
 * and, for the whole process, the bytes of same-host segments it maps
 * (shm map mode) that are still being warmed in the background: until a
 * part is warm, transfers to it take the slower checked fd path. The
 * client's one engine's, whichever thread moved the bytes. */
typedef struct mkv_transfer_stats {
    uint64_t bytes_tcp, bytes_shm, bytes_rdma;
    uint64_t retries, failovers;
    uint64_t shm_cold_bytes;
} mkv_transfer_stats;
void mkv_transfer_stats_get(mkv_client *c, mkv_transfer_stats *out);
/* Adds c's transfer counters to *sum (not shm_cold_bytes: that one is the
 * process's, which mkv_transfer_stats_get already reports whole). */
void mkv_transfer_stats_add(mkv_client *c, mkv_transfer_stats *sum);

#ifdef __cplusplus
}
#endif
#endif
