/* backend/transport.h - the one seam between the transfer engine and a wire.
 *
 * A transport moves bytes between registered local memory and a range of a
 * memory node's segment. TCP, shared memory and RDMA verbs each implement
 * te_transport_ops; slicing, striping, retries and replica failover live in
 * the engine above (engine.h) and never look inside a transport.
 *
 * Model: a transport owns many paths (one TCP connection, one QP, one shm
 * mapping): each joins one local address to one peer data address and is
 * authenticated with the cluster secret before it carries a request.
 * Requests are queued on a path with submit() and finish as completions
 * that poll() returns, in any order, tagged with the caller's cookie. */
#ifndef MKV_TRANSPORT_H
#define MKV_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TE_ADDR_LEN     64      /* "host:port", "unix:/path", "rdma:dev/port" */
#define TE_MAX_PATHS    16      /* data addresses per node or client */
#define TE_SECRET_MAX   256
#define TE_MAC_LEN      16

/* TE_READ_DISK reads an object from the node's disk tier rather than its
 * segment (docs/SSD_TIER.md): its cap has TE_CAP_DISK and names the
 * record (cap.h), remote_off - cap.offset is the offset in the object. */
typedef enum te_op { TE_READ = 0, TE_WRITE = 1, TE_READ_DISK = 2 } te_op;

/* Completion status codes (0 = done). */
enum {
    TE_OK = 0,
    TE_EIO = -1,        /* the path broke: retry on another path */
    TE_ETIMEDOUT = -2,  /* no answer within the request timeout */
    TE_EAUTH = -3,      /* peer refused our secret or capability */
    TE_ERANGE = -4,     /* offset/length outside what the capability allows */
    TE_ECLOSED = -5,    /* path closed before the request finished */
    TE_EINVAL = -6,     /* malformed request (bad local buffer, zero length) */
    TE_EFAULT = -7      /* the local buffer could not be read or written (a bad pointer):
                         * the caller's own fault, not the node's or the path's */
};

#define TE_CAP_READ  1u
#define TE_CAP_WRITE 2u
#define TE_CAP_DISK  4u   /* TE_READ_DISK only: never a segment range */

/* A capability: the master's signed statement that its holder may access
 * [offset, offset+length) of node_id's segment until expiry_ms (wall
 * clock). Nodes verify the MAC with a key only master and nodes know
 * (backend/cap.h); clients just carry it. */
typedef struct te_cap {
    uint32_t node_id;
    uint32_t rights;      /* TE_CAP_READ | TE_CAP_WRITE */
    uint64_t offset;
    uint64_t length;
    uint64_t expiry_ms;
    uint64_t term;        /* the issuing master's term: a node honours only its master's current one */
    uint64_t issued_us;   /* when granted, master clock in us, unique per grant: newer write grants win (claims.h) */
    uint8_t mac[TE_MAC_LEN];
} te_cap;

typedef struct te_transport te_transport;
typedef struct te_path te_path;

/* Registered local memory. Requests' local buffers must lie inside one. */
typedef struct te_mr {
    void *addr;
    size_t len;
    uint32_t lkey;        /* transport-specific (RDMA), else 0 */
    void *priv;
} te_mr;

#define TE_REQ_SEGS 32   /* local segments of one request at most */

typedef struct te_req {
    te_op op;             /* TE_WRITE: local -> node; TE_READ, TE_READ_DISK: node -> local */
    void *local;          /* inside a registered region (unused with iov) */
    /* Optional, for a transport with ops->segments: the local bytes are
     * these niov (1..TE_REQ_SEGS) segments in order, each inside a
     * registered region, their lengths summing to len (an object held in
     * pieces moves a range as one request). */
    const struct iovec *iov;
    int niov;
    uint64_t remote_off;  /* offset in the node's segment */
    uint64_t len;
    const te_cap *cap;    /* must cover [remote_off, remote_off+len); kept valid until completion */
    uint64_t cookie;      /* returned untouched in the completion */
} te_req;

typedef struct te_cqe {
    uint64_t cookie;
    int status;           /* TE_OK or a TE_E* code */
    te_path *path;        /* the path it ran on */
    int has_crc;          /* 1: crc is crc32c(0, bytes moved), computed while copying them */
    uint32_t crc;
} te_cqe;

/* What the engine needs to choose a transport for a node address without
 * knowing any transport by name. */
typedef struct te_transport_ops {
    const char *name;     /* "tcp", "shm", "rdma": a label for logs and stats */
    /* The address scheme it owns ("unix" for "unix:/path"), or NULL for
     * plain "host:port" addresses. */
    const char *scheme;
    /* 1: may also carry a plain "host:port" when no transport in use owns
     * those and the node names no address of this one's scheme (RDMA's
     * set-up port may be given bare). */
    int bare_fallback;
    /* 1: the peer is on this host (shm): its paths are tried before any
     * network one, and one path per address is enough (no local-address
     * or stream fan-out). */
    int same_host;
    /* 1: takes requests with local segments (te_req.iov). */
    int segments;
    /* 1: carries TE_READ_DISK (the node reads its disk tier into the
     * stream); a transport without it (shm, RDMA) leaves such reads to
     * one that has it. */
    int disk_reads;
    /* The node id the peer announced when the path connected, or NULL
     * when the transport learns none; the engine then refuses a path
     * whose node is not the one it dialed (a same-host socket name can
     * be answered by another node). */
    uint32_t (*path_node_id)(const te_path *p);
    /* Open and authenticate one path from local_addr (NULL: any) to a
     * node's data address. 0 on success, -1 with a message in err, or
     * TE_EAUTH when the node answered and refused our secret. */
    int (*connect)(te_transport *t, const char *local_addr, const char *peer_addr,
                   te_path **out, char *err, size_t errlen);
    int (*reg_mem)(te_transport *t, void *addr, size_t len, te_mr **out,
                   char *err, size_t errlen);
    void (*dereg_mem)(te_transport *t, te_mr *mr);
    /* Queue up to n requests; returns how many were accepted (fewer when
     * the path's in-flight window is full), -1 if the path is broken. */
    int (*submit)(te_path *p, const te_req *reqs, int n);
    /* Progress I/O and return up to max completions from any path; waits
     * at most timeout_ms (0 = don't block) when none are ready. */
    int (*poll)(te_transport *t, te_cqe *out, int max, int timeout_ms);
    /* Optional: the read r done at once on the calling thread when it can
     * be without waiting (shm: through a mapping whose chunks are warm),
     * *crc the checksum of its bytes: TE_OK; else non-zero and nothing
     * done (submit it as usual). now_ms: the wall clock, for the cap. */
    int (*read_now)(te_path *p, const te_req *r, uint64_t now_ms, uint32_t *crc);
    /* Optional: the same for a write r (*crc: the checksum of the bytes
     * it wrote). */
    int (*write_now)(te_path *p, const te_req *r, uint64_t now_ms, uint32_t *crc);
    /* Optional: a hint that read_now will be asked for r soon: its first
     * bytes start on their way into the cache (a batch of small reads
     * then waits for its misses together, not one after another). */
    void (*prefetch)(te_path *p, const te_req *r);
    /* In-flight requests of a closed path complete with TE_ECLOSED. */
    void (*close)(te_path *p);
    void (*destroy)(te_transport *t);
} te_transport_ops;

/* Settings common to every transport. */
typedef struct te_config {
    char secret[TE_SECRET_MAX];   /* cluster secret, proves membership */
    int window;                   /* in-flight requests per path (default 64) */
    int timeout_ms;               /* per request (default 5000) */
    int connect_timeout_ms;       /* default 2000 */
    int shm_mode;                 /* shm only: TE_SHM_MAP (default) or TE_SHM_FD */
    int copy_threads;             /* shm: threads copying bytes, the caller's included; 0 = by cores (<= 4) */
    int shm_warm_mbps;            /* shm map mode: background warming's rate bound, MB/s (0 = 1024) */
} te_config;

/* How the shm transport reaches a node's segment. MAP: the client maps
 * it and copies in and out of the mapping, checking capabilities itself
 * (for clients the node's owner trusts: a writable mapping can write
 * anywhere in it). FD: pread/pwrite on the segment fd, the node verifying
 * every request's capability first. */
enum { TE_SHM_MAP = 0, TE_SHM_FD = 1 };

struct te_transport {
    const te_transport_ops *ops;
    te_config cfg;
    void *priv;
};

/* Convenience wrappers so callers never touch ops directly. */
static inline int te_connect(te_transport *t, const char *local, const char *peer,
                             te_path **out, char *err, size_t errlen) {
    return t->ops->connect(t, local, peer, out, err, errlen);
}
static inline int te_submit(te_transport *t, te_path *p, const te_req *r, int n) {
    return t->ops->submit(p, r, n);
}
static inline const char *te_transport_name(const te_transport *t) { return t->ops->name; }
static inline int te_poll(te_transport *t, te_cqe *out, int max, int timeout_ms) {
    return t->ops->poll(t, out, max, timeout_ms);
}

const char *te_strerror(int status);
/* Length of addr's scheme ("unix" in "unix:@x", "rdma" in "rdma:h:p"),
 * 0 for a plain "host:port" (whatever follows the first ':' is a port). */
size_t te_addr_scheme_len(const char *addr);
/* Fill zero fields of cfg with the defaults above (window 64, timeouts
 * 5000/2000 ms); every transport's create calls it on its copy. */
void te_config_defaults(te_config *cfg);

#endif
