/* client/client.h - libmoonkv internals shared by its files.
 *
 * client.c      connection, options, errors, the master round trip
 * command.c     building binary-safe master commands
 * topology.c    the node table (MOON.TOPOLOGY)
 * placement.c   decoding replica/extent replies into placements
 * regions.c     registered buffers
 * xfer.c        moving placements' bytes through the transfer engine
 * put.c         mkv_put and mkv_put_batch (one path for both)
 * get.c         mkv_get, mkv_get_batch, mkv_size
 * keys.c        mkv_remove, mkv_exists, mkv_exists_batch
 * leases.c      giving read leases back (MOON.RELEASE, pipelined)
 * recent.c      the last read locations, for gets that copy while asking
 * vec.c         objects held in pieces (scatter/gather), their checksums
 * lanes.c       sharing one client between threads: the core and its lanes
 * async.c       the asynchronous face (moonkv_async.h): queue, threads, completions
 * async_ops.c   its operations as steps: master legs by callback, data legs on its threads
 *
 * Threads: the handle mkv_connect returns is the first lane of a core
 * (mkv_core) that holds what the threads share: the one node table, the
 * one transfer engine (which runs transfers from several threads at
 * once, each on a context of its own: backend/engine.h), the registered
 * memory and the pool of lanes. A lane is an mkv_client of its own: a
 * master connection and the per-call state (leases to give back, recent
 * locations, scratch, checksum helpers). Every exported call holds a lane for its duration
 * (MKV_ON_LANE): a free one, a new one up to the core's limit, or it
 * waits for one; the calls it makes inside stay on it.
 *
 * Single and batch calls share one code path: a single call is a batch
 * of one that sends the single-key command (MOON.PUTSTART rather than
 * MOON.MPUTSTART) and reads its reply as the batch's only element. */
#ifndef MKV_CLIENT_H
#define MKV_CLIENT_H

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "backend/engine.h"
#include "backend/transport.h"
#include "client/moonkv_internal.h"
#include "client/moonkv.h"
#include "client/route.h"
#include "proto/limits.h"
#include "proto/cmd.h"
#include "proto/slices.h"

#define MKV_ERR_LEN        256
#define MKV_PUT_ATTEMPTS   3        /* placements of one put when nodes fail */
#define MKV_NET_STREAMS    2        /* connections per network path to a node */
#define MKV_TRANSFER_UNIT  (512u << 10)   /* the engine's unit_size: one request on one path */
#define MKV_MAX_REGIONS    256
#define MKV_MAX_DONE_LEASES (4 * PROTO_MAX_BATCH)   /* finished reads' leases waiting to go back */
#define MKV_PENDING        (-1000)  /* an object's status while its read goes on; never returned */
#define MKV_MAX_PIECES     65536    /* pieces of one scatter/gather object */
#define MKV_DEFAULT_LANES  4        /* lanes of a core unless mkv_options.lanes says */
#define MKV_MAX_LANES      16

/* ---- topology.c ---- */
typedef enum mkv_node_state { MKV_NODE_ALIVE, MKV_NODE_DRAINING, MKV_NODE_DEAD } mkv_node_state;

typedef struct mkv_node {
    uint32_t id;                         /* 0: slot unused */
    mkv_node_state state;
    int naddrs;
    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
} mkv_node;

typedef struct mkv_topology {
    uint32_t count;                      /* ids 1..count are listed */
    mkv_node *nodes;                     /* nodes[id - 1] */
    uint64_t version;                    /* bumped at every refresh */
    uint64_t term;                       /* the master term it is known valid for; 0 not yet */
    uint64_t conn;                       /* the master connection it was read on (mkv_client.conn_id) */
    uint64_t epoch;                      /* bumped when forgotten: lanes drop every node */
} mkv_topology;

/* ---- placement.c ---- */
typedef struct mkv_replica {
    uint32_t nextents;                   /* cover the object in order */
    te_extent *extents;                  /* the engine's own type: handed over as is */
} mkv_replica;

/* Read leases a finished get is done with (leases.c). */
typedef struct mkv_lease {
    char *key;
    size_t keylen;
    uint64_t until;                      /* the lease's read caps' expiry */
} mkv_lease;

typedef struct mkv_leases {
    mkv_lease *v;                        /* grows up to MKV_MAX_DONE_LEASES */
    size_t n, cap;
} mkv_leases;

typedef struct mkv_placement {
    uint64_t term;                       /* the granting master's, from the caps */
    uint64_t size;
    uint32_t crc;                        /* get only */
    proto_slices slices;                 /* get only: per-slice CRCs, count 0 if none kept */
    uint32_t nreplicas;
    mkv_replica replicas[PROTO_MAX_REPLICAS];
    te_extent *block;                    /* every replica's extents, one allocation pl owns;
                                            NULL when they live in the caller's memory */
} mkv_placement;

/* ---- put.c ---- */
/* Whether o can be put: its key, a size, its buffer registered (v, or
 * NULL: o->buf holds it, else v's pieces do). MKV_OK or why not. */
int mkv_put_check(mkv_client *c, const mkv_obj *o, const mkv_objv *v);

/* ---- get.c: split gets and puts (moonkv_internal.h) ---- */
struct mkv_located;
struct proto_placed;
/* A located's own copy of pl (which it then owns), and its placement. */
struct mkv_located *mkv_located_wrap(const mkv_placement *pl);
/* A located holding a packed record's replicas (mkv_placement_take), in
 * one block with it. */
struct mkv_located *mkv_located_of(const struct proto_placed *r);
const mkv_placement *mkv_located_placement(const struct mkv_located *l);

/* ---- leases.c ---- */
struct mkv_out;
/* The expiry of the read caps behind pl (all of one lease share it); 0 if none. */
uint64_t mkv_lease_until(const mkv_placement *pl);
/* The read behind pl is over: give its lease back with the next master
 * command (dropped when MKV_MAX_DONE_LEASES wait already: it expires). */
void mkv_lease_done(mkv_client *c, const void *key, size_t keylen, const mkv_placement *pl);
/* MOON.RELEASE for the leases waiting, into o ahead of the next command
 * (pipelined), PROTO_MAX_BATCH leases per command: how many (their
 * replies come first). */
int mkv_leases_add(mkv_client *c, struct mkv_out *o);
/* The same for a list of one's own (the async face's): keep a lease of
 * key until `until` (0: none), and put the kept ones into o. */
void mkv_lease_keep(mkv_leases *d, const void *key, size_t keylen, uint64_t until);
int mkv_leases_out(mkv_leases *d, struct mkv_out *o);
void mkv_leases_clear(mkv_leases *l);   /* empties it; the array stays */
void mkv_leases_free(mkv_leases *l);

/* ---- regions.c ---- */
typedef struct mkv_region {
    void *addr;
    size_t len;
} mkv_region;

typedef struct mkv_regions {
    int n;
    mkv_region r[MKV_MAX_REGIONS];
} mkv_regions;

/* ---- recent.c ---- */
#define MKV_RECENT_SLOTS 1024            /* locations remembered at most, by key hash */
typedef struct mkv_recent {
    char *key;
    size_t keylen;
    uint64_t kept;                       /* when, in the client's count of keeps */
    mkv_placement pl;
} mkv_recent;

/* ---- mlink.c ---- */
struct mkv_meanwhile;
/* What a call sent with mkv_link_send is told: its reply (the callee's
 * to free) or NULL and why not (an MKV_E* code). */
typedef void mkv_reply_fn(void *arg, redisReply *reply, int code);

/* A call waiting on the master connection for its reply: a thread
 * blocked in mkv_link_call, or a callback (fn) for mkv_link_serve. */
typedef struct mkv_waiter {
    struct mkv_waiter *next;
    int skip;                            /* replies ahead of its own (MOON.RELEASE's) */
    int done, code;                      /* code: MKV_OK, or why no reply came */
    redisReply *reply;
    uint64_t deadline_ms;
    uint64_t conn;                       /* the connection's id it went out on */
    mkv_reply_fn *fn;                    /* NULL: a thread waits; else heap-allocated, fn's */
    void *arg;
    int notify;                          /* an eventfd posted when fn is due and this thread does not run it, or -1 */
} mkv_waiter;

/* The core's one master connection, pipelined across threads. */
typedef struct mkv_mlink {
    pthread_mutex_t send_mu;             /* one sender at a time (bytes and queue in one order), opens */
    pthread_mutex_t mu;                  /* the rest; taken after send_mu */
    pthread_cond_t cv;                   /* replies handed out, the reader left, the link broke */
    redisContext *rc;                    /* NULL: none; its fd and reader are used, not its I/O */
    int broken;                          /* its waiters failed; the next call opens another */
    int retiring;                        /* the master is not the leader: nothing more goes on it,
                                          * and it breaks once the replies due are in */
    int reading;                         /* a waiter reads for all of them */
    int stalled;                         /* send_mu's holder may wait: connecting, or for room (atomic) */
    uint64_t id;                         /* core->conns when it was opened */
    mkv_waiter *head, *tail;             /* in the order their commands went out */
    mkv_waiter *fired, *fired_tail;      /* callback waiters done, for mkv_link_serve to call */
    char host[256];
    int port;
    int64_t leader_term;                 /* the term etcd named with host:port */
    struct lw_conn *watched;             /* etcd: shuts it down when another leader is elected */
    int why_code;                        /* why it broke */
    char why[MKV_ERR_LEN];
} mkv_mlink;

/* The live pins this client made (client/pins.c), so a new master
 * connection pins them again (MOON.REPIN): a new leader starts with none.
 * Bounded by what the master accepted (PROTO_PIN_MAX_PER_CONN keys). */
struct mkv_core;
typedef struct mkv_pinrec mkv_pinrec;
typedef struct mkv_pins {
    pthread_mutex_t mu;
    mkv_pinrec *head;
    /* The keeper (client/pinkeep.c): a thread, started by the first pin,
     * that re-pins on a new leader as soon as the connection moves. */
    pthread_t keeper;
    int keeping;                         /* the thread runs */
    int stop;                            /* under mu */
    int wake;                            /* eventfd: a pin noted, or stop */
    uint64_t repins;                     /* connections it opened again for the pins */
} mkv_pins;

void mkv_pins_init(mkv_pins *p);
void mkv_pins_free(mkv_pins *p);
/* On a fresh connection nobody else uses yet: MOON.REPIN of every live
 * pin, pipelined. 0, or -1 with err when the connection failed or the
 * master does not lead (the pins stay for the next connection); a pin the
 * master refused otherwise (a bound) is forgotten. */
int mkv_pins_restore(mkv_pins *p, redisContext *rc, char *err, size_t errlen);
/* Live pins left (expired ones dropped); mu held. */
int mkv_pins_live(mkv_pins *p, uint64_t now_ms);
/* pinkeep.c: start the keeper unless it runs (a pin was noted); stop it
 * (before the link goes). */
void mkv_pinkeep_start(struct mkv_core *k);
void mkv_pinkeep_stop(struct mkv_core *k);

/* Commands formatted for the wire, sent in one go. */
typedef struct mkv_out {
    char *buf;
    size_t len, cap;
    int count;
} mkv_out;

void mkv_link_init(mkv_mlink *L);
void mkv_link_free(mkv_mlink *L);
/* Where the master is (without etcd, which says it itself). */
void mkv_link_where(mkv_client *c, const char *host, int port);
/* Open the connection unless it is up: MKV_OK or why not. */
int mkv_link_open(mkv_client *c);
/* The master answered READONLY (not the leader): no more commands go on
 * this connection, the ones on it keep their replies, and it closes once
 * they are in, so the next call asks etcd again. */
void mkv_link_retire(mkv_client *c);
void mkv_out_add(mkv_out *o, int argc, const char **argv, const size_t *argvlen);
/* from's commands after o's. */
void mkv_out_append(mkv_out *o, const mkv_out *from);
void mkv_out_free(mkv_out *o);
/* Send out's commands (opening the connection if needed) and wait for
 * their replies: the last one, the others dropped; or NULL with *code
 * set. *sent: some of it went out (never send it again). mw->fn runs
 * once it is written, before the reply is awaited. */
redisReply *mkv_link_call(mkv_client *c, const mkv_out *out, int *code, int *sent, struct mkv_meanwhile *mw);
/* Send out's commands (opening the connection if needed) and return
 * without waiting: fn(arg, reply, code) runs once, for the last reply,
 * on the thread in mkv_link_serve that finds it done, or in
 * mkv_link_serve_now(notify) (or on this one, now, when nothing could be
 * sent: then its code is returned, else MKV_OK). notify (an eventfd, or
 * -1) is posted when fn is due and the thread that found it done does
 * not run it. No lock of the link is held then. */
int mkv_link_send(mkv_client *c, const mkv_out *out, mkv_reply_fn *fn, void *arg, int notify);
/* As mkv_link_send, but never waits to connect or for room to write: on
 * a connection that is up (not being opened, nobody waiting for room)
 * whose socket takes the first bytes at once MKV_OK (fn runs later),
 * else MKV_LINK_DOWN with nothing sent and fn not run. For a thread that
 * must not block (the async face's submitter). */
#define MKV_LINK_DOWN (-1001)
int mkv_link_send_up(mkv_client *c, const mkv_out *out, mkv_reply_fn *fn, void *arg, int notify);
/* The live connection's fd and id, or -1 (none, or retiring; it may
 * break the next moment); 1 while one is up. */
int mkv_link_fd(mkv_client *c, uint64_t *id);
int mkv_link_up(mkv_client *c);
/* The live connection's fd added to epfd (EPOLLIN, edge triggered)
 * unless *id names it already, under the link's lock (so the fd is the
 * connection's, not a number closed and reused meanwhile): 1 and *id set
 * when it was added, else 0. */
int mkv_link_watch(mkv_client *c, int epfd, uint64_t *id);
/* The connection named id taken out of epfd again (under the lock, as
 * mkv_link_watch): 1 when it was there and is gone. */
int mkv_link_unwatch(mkv_client *c, int epfd, uint64_t id);
/* One turn for the callbacks: read for up to a slice (or until wake_fd,
 * if >= 0, is readable) when calls wait and no thread reads, else wait
 * briefly for the one that does; then run the callbacks of the replies
 * that came (and of calls a broken connection failed). */
void mkv_link_serve(mkv_client *c, int wake_fd);
/* Without waiting: what has come read (if read, and no thread reads), an
 * overdue reply's connection broken, and the callbacks that are due run:
 * those sent with notify `only`, or all of them for -1. The bytes read. */
size_t mkv_link_serve_now(mkv_client *c, int only, int read);
/* Master connections the core opened so far. */
int mkv_link_connections(mkv_client *c);
/* The live connection's fd and id (watched by the etcd leader watch while
 * keep), or -1 if there is none. */
int mkv_link_peek(mkv_mlink *L, int keep, uint64_t *id);
/* Break the connection if it is still the one of id. */
void mkv_link_drop_id(mkv_mlink *L, uint64_t id);

/* ---- lanes.c ---- */
#define MKV_OPTION_STRS 8   /* the strings of mkv_options */
/* *opt into *dst with copies of its strings, which strs then owns (free each). */
void mkv_options_keep(mkv_options *dst, char *strs[MKV_OPTION_STRS], const mkv_options *opt);

typedef struct mkv_core {
    pthread_mutex_t mu;                  /* the lanes, topo, conns */
    pthread_cond_t idle_cv;              /* a lane went back */
    struct mkv_client *lanes[MKV_MAX_LANES];   /* lanes[0]: the handle */
    struct mkv_client *idle[MKV_MAX_LANES];
    int nlanes, nidle, growing, max_lanes;
    uint64_t grow_failed_ms;             /* a new lane could not be made: not again for a while */
    mkv_options opt;                     /* for new lanes; its strings owned (strs) */
    char *strs[MKV_OPTION_STRS];
    mkv_topology topo;                   /* the one node table */
    uint64_t conns;                      /* master connections opened so far: their ids */
    pthread_rwlock_t regions_lock;       /* regions; taken before mu */
    mkv_regions regions;
    te_engine *engine;                   /* the one transfer engine, every lane's */
    pthread_mutex_t sync_mu;             /* known, synced: the engine's view of topo */
    mkv_node *known;                     /* the nodes the engine was told of */
    uint32_t nknown;
    uint64_t synced, synced_epoch;       /* the topology's version, epoch it matches */
    mkv_mlink link;                      /* the one master connection */
    mkv_pins pins;                       /* pinned again on each new connection */
} mkv_core;

/* A lane held for one exported call (nested: the caller's own). */
typedef struct mkv_hold {
    struct mkv_client *lane;
    struct mkv_client *prev;             /* another client's lane this thread held (a call inside one) */
    int nested;
} mkv_hold;

/* The lane for a call on c (the handle, or a lane this thread holds
 * already); it may wait for one. Give it back with mkv_lane_give. */
mkv_hold mkv_lane_take(struct mkv_client *c);
void mkv_lane_give(mkv_hold *h);
/* In an exported call, after its NULL checks: c becomes a lane held
 * until the call returns. */
#define MKV_ON_LANE(c) \
    mkv_hold mkv_hold_ __attribute__((cleanup(mkv_lane_give))) = mkv_lane_take(c); \
    (c) = mkv_hold_.lane
/* Start the core of the first lane c (mkv_connect); MKV_OK or MKV_EINVAL. */
int mkv_core_start(struct mkv_client *c, const mkv_options *opt);
/* Close every lane but the handle's and free the core. */
void mkv_core_stop(struct mkv_client *c);
/* A new lane of core (not yet in its lists), or NULL. */
struct mkv_client *mkv_lane_new(mkv_core *core);
/* fn(lane, arg) for every lane of c's core, under its lock. */
void mkv_lanes_each(struct mkv_client *c, void (*fn)(struct mkv_client *lane, void *arg), void *arg);

struct mkv_client {
    mkv_core *core;                      /* shared with the other lanes */
    uint64_t conn_id;                    /* the master connection's id (core->conns), 0: none */
    char host[256];                      /* from the options; the link's own is mkv_mlink.host */
    int port;
    char *password;
    char secret[TE_SECRET_MAX];
    char transport[16];
    int shm_mode;                        /* TE_SHM_MAP or TE_SHM_FD */
    int copy_threads;                    /* mkv_options.copy_threads */
    char *data_addrs;
    int replicas;
    int timeout_ms;
    te_engine *engine;           /* the core's */
    struct workpool *crc_pool;   /* started at the first large checksum */
    mkv_leases done;             /* read leases to give back with the next command */
    mkv_recent **recent;         /* MKV_RECENT_SLOTS (NULL: empty), from the first get that keeps one */
    uint64_t recent_kept;        /* locations kept so far */
    struct etcd_client *etcd;    /* NULL: host:port is the one master (the handle's serve the link) */
    struct leader_watch *watch;  /* etcd: breaks the link when another leader is elected */
    char cluster[64];
    struct mkv_route *route;     /* mkv_options.groups: this handle routes to group clients (route.h) */
    void *scratch;               /* registered: a range read's bytes outside its range */
    size_t scratch_len;
};

/* ---- client.c ---- */
/* Options into the lane's own fields (copies of the strings). */
int mkv_lane_options(mkv_client *c, const mkv_options *opt);
/* Free what a lane alone holds (not the core). */
void mkv_lane_free(mkv_client *c);
/* Record why and return code, so error paths read `return mkv_fail(...)`. */
int mkv_fail(mkv_client *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Work for the time the reply is on its way: fn(arg) runs once, after
 * the command was written and before its reply is read. */
typedef struct mkv_meanwhile {
    void (*fn)(void *arg);
    void *arg;
} mkv_meanwhile;
redisReply *mkv_command_meanwhile(mkv_client *c, int argc, const char **argv, const size_t *argvlen,
                                  int *code, mkv_meanwhile *mw);
/* Map a master error reply ("EXISTS ...", "NOSPACE ...") to an MKV_E*
 * code by its first word (proto/status.h), keeping the text as the last
 * error. */
int mkv_reply_error(mkv_client *c, const char *msg, size_t len);
/* MKV_EPROTO with a note on what was expected. */
int mkv_bad_reply(mkv_client *c, const char *what, const redisReply *r);
int mkv_check_key(mkv_client *c, const void *key, size_t keylen);
/* CRC32C of an object's bytes; large ones split over helper threads. */
uint32_t mkv_checksum(mkv_client *c, const void *buf, size_t len);
/* The helper threads checksums are spread over (NULL: the caller alone). */
struct workpool *mkv_crc_pool(mkv_client *c);
/* out[i] = the checksum of bufs[i] (lens[i] bytes), many objects at once
 * over the same helper threads. */
void mkv_checksum_many(mkv_client *c, const void *const *bufs, const size_t *lens, uint32_t *out,
                       size_t n);
/* Per-slice checksums of buf (len bytes) in slices of sl->size into
 * sl->crc (room for sl->count, which must be the slice count); returns
 * the checksum of the whole, combined from them. */
uint32_t mkv_checksum_slices(mkv_client *c, const void *buf, uint64_t len, proto_slices *sl);

/* ---- keys.c ---- */
/* Adds the keys of objs[0..n) to cmd (begun with room for them) and runs
 * it: the reply, or NULL with *rc set (a bad key is refused unsent). */
redisReply *mkv_keys_run(mkv_client *c, proto_cmd *cmd, const mkv_obj *objs, size_t n, int *rc);
/* MOON.PREFIX's (or PREFIXPIN's) reply r for n keys: how many leading
 * ones are present into *count, or the error. */
int mkv_prefix_count(mkv_client *c, const char *verb, const redisReply *r, size_t n, size_t *count);
/* MOON.MREMOVE's reply r for objs[0..n): each key's status (MKV_OK
 * removed, MKV_ENOTFOUND, or its error) set, MKV_OK; or the reply's error. */
int mkv_removed_statuses(mkv_client *c, const redisReply *r, mkv_obj *objs, size_t n);

/* ---- command.c: the commands themselves are proto/cmd.h's ---- */
/* Send cmd and free it; the reply, or NULL with *code set (see mkv_command). */
redisReply *mkv_cmd_run(mkv_client *c, proto_cmd *cmd, int *code);
redisReply *mkv_cmd_run_meanwhile(mkv_client *c, proto_cmd *cmd, int *code, mkv_meanwhile *mw);
/* The reply for item i of n: the batch reply's element i, or for a
 * single-key command the reply itself. NULL if the shape is wrong. */
const redisReply *mkv_reply_item(const redisReply *r, size_t n, size_t i);

/* ---- topology.c (mkv_topology_refresh: moonkv_internal.h) ---- */
void mkv_topology_free(mkv_topology *t);
/* Bring the core's engine to the core's node table. */
void mkv_topology_sync(mkv_client *c);
/* Node id failed every path: 1 if the master's topology, read again now,
 * gives it other addresses (it restarted: a shm socket's name holds the
 * node's pid), which the engine then has. */
int mkv_topology_readdressed(mkv_client *c, uint32_t id);
/* The engine did not know node id (our table had it dead or not yet):
 * 1 if the master's topology, read again now, has it up, which the
 * engine then has; 0 if not; -1 if it could not be read. */
int mkv_topology_learnt(mkv_client *c, uint32_t id);
/* Tell the engine every node is gone and forget them (the next
 * placement refreshes). */
void mkv_topology_forget(mkv_client *c);
/* Make sure every node a placement names is known, refreshing once. A
 * placement of another master term than the topology's (a restarted
 * master, a new leader: node ids may name other nodes now) first
 * forgets the whole table and reads it again. */
int mkv_topology_cover(mkv_client *c, const mkv_placement *pl);

/* ---- placement.c ---- */
/* r: the per-replica array of extent arrays of PUTSTART / GET. */
int mkv_placement_decode(mkv_client *c, const redisReply *r, uint64_t size, uint32_t rights,
                         mkv_placement *pl);
/* GET's [size, crc, replicas] or [size, crc, replicas, slice_size,
 * slice CRCs]; MKV_ENOTFOUND for a nil reply. */
int mkv_located_decode(mkv_client *c, const redisReply *r, mkv_placement *pl);
/* pl's replicas from a packed record's (proto/placed.h, decoded into the
 * caller's buffer: MOON.MGETPACKED's and MOON.MPUTSTART PACKED's),
 * their extents copied to ext (room for r->nextents, the caller's: pl
 * owns no block, and mkv_placement_free frees only its slices), the size
 * theirs. */
void mkv_placement_take(mkv_placement *pl, const struct proto_placed *r, te_extent *ext);
/* The same into one block pl owns (pl->block). */
void mkv_placement_take_own(mkv_placement *pl, const struct proto_placed *r);
void mkv_placement_free(mkv_placement *pl);
/* The placement of bytes [off, off+len) of whole (in range): every
 * replica's extents clipped to them, same caps (a node takes any range
 * inside a grant). Free it with mkv_placement_free, also on failure. */
int mkv_placement_clip(mkv_client *c, const mkv_placement *whole, uint64_t off, uint64_t len,
                       mkv_placement *pl);

/* ---- recent.c ---- */
/* The location a get of key last found (its lease given back since:
 * the bytes there may be another object's now), or NULL. */
const mkv_placement *mkv_recent_find(const mkv_client *c, const void *key, size_t keylen);
/* Remember *pl as key's location, taking it (*pl is emptied). */
void mkv_recent_keep(mkv_client *c, const void *key, size_t keylen, mkv_placement *pl);
/* 1 if was and now name the same bytes: same master term, size, CRC and
 * every replica's extents. */
int mkv_recent_same(const mkv_placement *was, const mkv_placement *now);
void mkv_recent_free(mkv_client *c);

/* ---- regions.c ---- */
/* 1 if [addr, addr+len) lies inside one registered region. */
int mkv_registered(mkv_client *c, const void *addr, size_t len);
void mkv_regions_clear(mkv_client *c);

/* ---- xfer.c ---- */
typedef struct mkv_xfer {
    void *buf;                           /* inside a registered region */
    const mkv_placement *pl;
    int replica;                         /* reads: -1 any (engine fails over), else only this one */
    int status;                          /* out: MKV_OK or MKV_E* */
    uint32_t failed_node;                /* out: the node at fault, 0 if none (te_object's) */
    uint32_t unknown_node;               /* out: a node the engine did not know (te_object's) */
    int crc_ok;                          /* out: the engine checksummed the bytes as it moved them */
    uint32_t crc;
    struct iovec *segs;                  /* the local bytes in segments (buf unused), owned: free() */
    int nsegs;
    proto_slices *sl;                    /* writes, optional: the slices' sums too (te_object's) */
    int slices_ok;                       /* out: sl->crc filled (with crc_ok) */
} mkv_xfer;

int mkv_engine_open(mkv_client *c);
int mkv_engine_reg(mkv_client *c, void *addr, size_t len);
void mkv_engine_dereg(mkv_client *c, void *addr);
/* Tell the engine about a node's data addresses (new or changed), or
 * that it is gone. */
int mkv_engine_node(mkv_client *c, const mkv_node *n);
void mkv_engine_drop(mkv_client *c, uint32_t id);
/* Move every object in one engine batch: TE_WRITE goes to every replica,
 * TE_READ to one of them. Sets each status; MKV_OK when the batch ran. */
int mkv_xfer_run(mkv_client *c, te_op op, mkv_xfer *x, size_t n);
/* The objects that can move at once (te_engine_read_now, _write_now: a
 * same-host warm mapping, no wait), moved, status MKV_OK (with crc_ok and
 * crc); the others MKV_PENDING, for mkv_xfer_run. How many moved. */
size_t mkv_xfer_now(mkv_client *c, te_op op, mkv_xfer *x, size_t n);

/* ---- async.c, async_ops.c: the asynchronous face ---- */
struct mkv_op;
/* A data leg waiting for a thread of the face (the first member of its
 * operation's record). A thread takes the legs of one kind queued in a
 * row and runs them at once: leg(jobs, n), one engine batch. */
#define MKV_ASYNC_LEG_BATCH 64
typedef struct mkv_ajob {
    struct mkv_ajob *next;
    void (*leg)(struct mkv_ajob **jobs, size_t n);
    size_t objs;                         /* its objects: a batch holds PROTO_MAX_BATCH at most */
} mkv_ajob;

typedef struct mkv_opq {
    struct mkv_op *head, *tail;
} mkv_opq;

#define MKV_ASYNC_MAX_THREADS MKV_MAX_LANES

struct mkv_async {
    mkv_client *c;
    int flags, efd, nthreads, closing;
    int wake;                            /* eventfd: the I/O thread has work */
    pthread_t io;                        /* sends what is submitted, serves the master link */
    int io_started;
    pthread_t threads[MKV_ASYNC_MAX_THREADS];   /* the data legs' */
    pthread_mutex_t mu;
    pthread_cond_t work_cv;              /* a data leg queued, or closing */
    pthread_cond_t idle_cv;              /* live reached 0 */
    mkv_opq todo, done;
    mkv_ajob *legs, *legs_tail;
    size_t pending;                      /* submitted, not yet drained / called back */
    size_t live;                         /* submitted, not yet completed */
    size_t master_wait;                  /* callbacks the master link owes the face */
    uint64_t down_until;                 /* a send failed (no master): the next fail at once till then */
    int down_code;
    struct mkv_asend *retry;             /* etcd: sends to repeat once a leader answers */
    struct mkv_asend *handoff, **handoff_tail;   /* submitters' sends that found no link up, for the I/O thread */
    mkv_opq late;                        /* inline faces: ops done inside submit, for the I/O thread to call back */
    int starting;                        /* the I/O thread starts or sends what was handed to it */
    int io_idle;                         /* the I/O thread sleeps on wake with nothing owed */
    int pfd;                             /* MKV_ASYNC_DRAIN_READS: epoll over efd and the link's fd, else -1 */
    uint64_t watch_id;                   /* the connection whose fd is in pfd (atomic) */
    mkv_leases leases;                   /* finished reads' leases, for the next command */
    struct mkv_route_face *route;        /* over a router: the groups' faces (route.h); no threads here */
};

/* A caller's own command (mkv_async_command): an op kind beyond the public ones. */
#define MKV_OP_COMMAND_ ((mkv_op_kind)64)

/* async_ops.c: op's first step (its master leg sent, or done at once). */
void mkv_aop_start(struct mkv_async *a, struct mkv_op *op);
/* async_ops.c: 1 for an op over objs (the *_BATCH kinds); 1 for such an
 * op missing its objs (or an exists batch its results). */
int mkv_op_is_batch(const struct mkv_op *op);
int mkv_op_batch_bad(const struct mkv_op *op);
/* async.c, for the steps: run j->leg on a thread of a; send out (begun
 * with mkv_async_out) with fn for its reply, and free it; a callback's
 * last act on a; op's status set, complete it (a read's lease:
 * mkv_async_lease, moonkv_internal.h). */
void mkv_async_leg(struct mkv_async *a, mkv_ajob *j);
void mkv_async_out(struct mkv_async *a, mkv_out *out);
void mkv_async_send(struct mkv_async *a, mkv_out *out, mkv_reply_fn *fn, void *arg);
void mkv_async_replied(struct mkv_async *a);
void mkv_async_finish(struct mkv_async *a, struct mkv_op *op);

/* ---- vec.c ---- */
/* Pieces that must hold an object's first need bytes: 1..MKV_MAX_PIECES
 * of them, the ones used inside registered regions. */
int mkv_pieces_check(mkv_client *c, const mkv_iov *iov, size_t niov, uint64_t need);
uint64_t mkv_pieces_len(const mkv_iov *iov, size_t niov);
/* The transfers of an object held in pieces (filled in order up to
 * pl->size), into x: one over pl with the pieces as its segments when
 * every transport of the engine takes them (x->segs, which the caller
 * frees); else one per piece used, each over pl clipped to the piece's
 * bytes (the clips into clips, the caller frees them with
 * mkv_placement_free; room for niov in both). A single piece that holds
 * the whole object goes over pl itself. How many, or a negative error. */
int mkv_pieces_xfers(mkv_client *c, const mkv_iov *iov, size_t niov, const mkv_placement *pl, int replica,
                     mkv_xfer *x, mkv_placement *clips);
/* The k transfers of one object as one outcome: the first failure (its
 * node), and crc_ok with the combined checksum when every piece had one. */
void mkv_pieces_fold(const mkv_xfer *x, int k, mkv_xfer *out);
/* The checksum of object bytes [off, off+len) held in pieces. */
typedef struct mkv_span_sum {
    const mkv_iov *iov;
    size_t niov;
    uint64_t off, len;
    uint32_t crc;                        /* out */
} mkv_span_sum;
/* Every s[i].crc at once, the parts spread over the helper threads. */
void mkv_pieces_sums(mkv_client *c, mkv_span_sum *s, size_t n);
/* mkv_checksum_slices for an object of len bytes held in pieces. */
uint32_t mkv_pieces_slices(mkv_client *c, const mkv_iov *iov, size_t niov, uint64_t len, proto_slices *sl);

#endif
