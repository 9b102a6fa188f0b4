/* master/master.h - the master role: the metadata (meta.h) behind RESP.
 *
 * master_role.c owns the process side (timers, start-up); master_cmds.c
 * turns each MOON.* command of docs/PROTOCOL.md into calls on the metadata. */
#ifndef MKV_MASTER_H
#define MKV_MASTER_H

#include <stdint.h>

#include "backend/cap.h"
#include "master/ha.h"
#include "master/meta.h"
#include "proto/chunks.h"
#include "proto/register.h"
#include "server/server.h"

#define MASTER_MAX_REPORT_BYTES (1ULL << 30)   /* buffered MOON.REPORT data */
#define MASTER_MAX_HOLDINGS 4096                /* notes per MOON.HOLDINGS reply */

typedef enum master_rebuild_state {
    REBUILD_NONE = 0,      /* no node claimed an id: nothing to wait for */
    REBUILD_COLLECTING,    /* nodes are reporting: puts get TRYAGAIN */
    REBUILD_BUILDING,      /* the window closed, the table is built in slices: still TRYAGAIN */
    REBUILD_DONE
} master_rebuild_state;

typedef struct master_key_chunk {
    char *base;
    size_t len, used;
} master_key_chunk;

/* Reported extents (huge pages) and the chunks their keys are packed into. */
typedef struct master_reports {
    mm_report *v;
    size_t n, cap, bytes;
    master_key_chunk *chunks;
    size_t nchunks, capchunks;
    mm_groups *groups;   /* v's key hashes, taken as it fills */
} master_reports;

/* After a restart (recovery.c): nodes that claim their ids back report
 * what they hold; the table is rebuilt when every node known to have
 * been a member said MOON.REPORTDONE, or at the window's deadline. The
 * build runs in slices between the loop's other work (build_wake), so
 * nodes and clients are answered while it runs. */
typedef struct master_rebuild {
    master_rebuild_state state;
    uint64_t opened_ms, deadline_ms, finished_ms;   /* mono ms */
    uint32_t *expect;      /* ids of nodes that should report, and ... */
    uint8_t *done;         /* ... whether each did, and ... */
    uint8_t *why;          /* ... why it is expected (recovery.c's EXP_*) */
    size_t nexpect;
    master_reports buf;    /* reports not being built yet */
    master_reports building;   /* the reports the running job is built from */
    mm_rebuild_job *job;   /* NULL: no build running */
    mm_rebuild_stats job_st;
    const mm_report **refused;   /* extents the job refused (in building) */
    size_t nrefused, caprefused;
    int again;             /* a node finished reporting during a build: build its reports next */
    int closed_by;         /* what closed the window (recovery.c's REBUILD_CLOSED_*) */
    int members_known;     /* this term read every member from etcd (members.c): no grace */
    loop_wake *build_wake;   /* runs the next turn (a timer would sleep the loop 1 ms first) */
    loop_timer *grace_timer; /* every node reported within the rejoin grace: closes at its end */
    uint64_t joins_held;   /* registrations without a claim told to wait (TRYAGAIN) */
    uint64_t nodes_reported, reports_total;
    uint64_t recovered, incomplete, lost, extents_refused;
    uint64_t table_ms;     /* of it, spent building the table from the reports */
    uint64_t table_cpu_ms; /* the CPU time that took */
} master_rebuild;

#define MASTER_MAX_GATEWAYS 64   /* gateways listed at once (gateways.c) */
#define MASTER_GATEWAY_ADDR 64

/* A gateway that announced its RESP address (MOON.GATEWAY). */
typedef struct master_gateway {
    char addr[MASTER_GATEWAY_ADDR];   /* "host:port" */
    uint64_t last_ms;                 /* last announce, mono ms */
} master_gateway;

typedef struct put_wait put_wait;   /* put_wait.c */
typedef struct get_wait get_wait;   /* get_wait.c */
typedef struct master_acks master_acks;   /* acks.c */
typedef struct holdings_wait holdings_wait;   /* holdings_wait.c */
typedef struct master_members master_members;   /* members.c */

typedef struct master {
    server *srv;
    master_meta *meta;
    uint8_t cap_key[TE_CAP_KEY_LEN];   /* signs capabilities; nodes get it at register */
    uint8_t reg_key[PROTO_REG_KEY_LEN];   /* from the cluster secret: register proofs */
    uint32_t default_replicas;
    master_rebuild rebuild;             /* recovery.c */
    resp_buf wire;                     /* scratch the proto encoders write replies into */
    mm_item *items;                    /* scratch of the batch commands (one runs at a time) */
    size_t items_cap;
    master_gateway gateways[MASTER_MAX_GATEWAYS];
    size_t ngateways;
    master_ha *ha;                     /* --etcd: leadership; NULL: the only master */
    uint64_t terms_dropped;            /* lost terms whose metadata was dropped */
    uint64_t incarnation;              /* without etcd, the term: start ms << 10 | random */
    uint64_t term_start_ms;            /* mono ms this master started or was elected */
    uint64_t elections_seen;           /* ha_view.elections_won when term_start_ms was set */
    put_wait *waits;                   /* puts waiting for quarantined space */
    get_wait *gets;                    /* gets waiting for loads from disk */
    master_acks *acks;                 /* answers waiting for their nodes' acks */
    holdings_wait *pulls;              /* nodes' MOON.HOLDINGS waiting for notes */
    master_members *members;           /* --etcd: the member records; NULL: none kept */
    struct master_slots *slots;        /* --group: the slot map it follows (slots.h); NULL: none */
    uint64_t remove_requests;          /* MOON.REMOVE and MOON.MREMOVE commands run (INFO cluster) */
    uint64_t last_sweep_ms;            /* mono ms of the last sweep: a stall shows as a gap */
} master;

master *master_create(server *srv);
void master_destroy(master *m);
/* MOON.* commands (master_cmds.c). */
void master_register_commands(server *srv);
/* Shared by the command files: "-WORD message" for st; an integer
 * argument in [min, max] or -1 after replying; the node id in argv[i]
 * if this connection registered it, or -1 after replying. */
void master_reply_fail(client *c, proto_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int master_arg_u64(client *c, int i, uint64_t min, uint64_t max, uint64_t *out);
int master_own_node(client *c, int i, uint32_t *id);
/* The node this connection registered (and still speaks for), or 0. */
uint32_t master_conn_node(client *c);
/* master_own_node, or a connection linked to that node's registration
 * by MOON.HOLDLINK (its holdings pulls come on a connection of their own). */
int master_holdings_node(client *c, int i, uint32_t *id);
/* 1 if this connection proved the cluster secret (MOON.PROVE, or the
 * proof of a MOON.REGISTER): commands flagged CMD_MEMBER may run on it
 * (master_gate). */
int master_conn_member(client *c);

/* A MOON.REGISTER, parsed (it may wait for etcd before it is run). */
typedef struct master_join {
    uint64_t segment_size;
    int naddrs;
    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
    mm_node_claim claim;
    int shared;                   /* CHUNKS: a node shared by groups, our chunks below */
    proto_chunks chunks;
} master_join;
/* Register the node of j and reply (master_cmds.c). */
void master_register_join(client *c, const master_join *j);

/* ---- rebuild after a restart (recovery.c) ---- */
/* MOON.REPORT, MOON.REPORTDONE, MOON.REBUILD, MOON.HOLDINGS. */
void master_register_recovery_commands(server *srv);
/* What a node does with its index after registering (MOON.REGISTER's
 * last reply element). */
enum { MASTER_REG_KEEP = 0, MASTER_REG_REPORT = 1, MASTER_REG_FORGET = 2 };
/* A node registered: MASTER_REG_*. A node claiming an id this master did
 * not know must report, and opens the rebuild window. */
int master_rebuild_joined(master *m, uint32_t id, mm_reg_kind kind);
/* A node that claims no id (a new one) waits with -TRYAGAIN while nodes
 * of the cluster's past may still claim theirs: for rejoin_grace_ms
 * after this master started or was elected, and while the window is
 * open (1: replied). Else it could get an id an old node still holds. */
int master_rebuild_holds_join(client *c, uint32_t claim_id);
/* While the window is open, refuse a put with -TRYAGAIN (1: replied). */
int master_rebuild_refuses(client *c);
/* Nonzero while this master may still hear from nodes of the cluster's
 * past: the window is open or building (1), or the rejoin grace runs
 * (its ms left; 0 once the member records were read from etcd). */
uint64_t master_rebuild_awaits_nodes(const master *m);
/* Items refused NOREPLICAS while the master awaits its nodes become
 * -TRYAGAIN: the nodes are on their way, the cluster is not short of them. */
void master_rebuild_soften(const master *m, mm_item *it, size_t n);
/* 1 while the window is open or the table is being built from it. */
int master_rebuild_busy(const master *m);
/* The window's deadline (sweep timer). */
void master_rebuild_tick(master *m);
/* Forget everything (exit, lost term). */
void master_rebuild_reset(master *m);
/* The member records this term read from etcd (members.c): expect them
 * all (opening the window if some exist), take their ids, and drop the
 * rejoin grace: every id in use is known. */
void master_rebuild_members(master *m, const uint32_t *ids, size_t n);
/* MOON.NODES EXPECTED: a line "<id> - expected 0 0" for each node the
 * open window waits for that is not a member yet (nodes name them in
 * MOON.REPORTDONE should this master die too). */
void master_rebuild_expected(master *m, resp_buf *out);
/* INFO fields rebuild_*. */
void master_rebuild_info(master *m, resp_buf *out);
/* INFO cluster: restarted nodes that kept their segment (restore.c). */
void master_restore_info(master *m, resp_buf *out);
/* MOON.GATEWAY: the registry of gateways (gateways.c). */
void master_register_gateway_commands(server *srv);
/* With --etcd, a standby (or a leader past its lease) refuses every
 * MOON.* command with -READONLY naming the leader (master_role.c). */
int master_gate(client *c, const command *cmd);
/* 1 while this master may answer as the leader: always without etcd;
 * with it, until its lease could have run out (its own clock). A reply
 * parked before a stall (put_wait.c, a PUTEND waiting for its nodes)
 * must be checked with this again when it is released: the lease may
 * have run out meanwhile, and a new leader's term begun without it. */
int master_may_lead(const master *m);
/* Unless master_may_lead, reply -READONLY naming the leader: 1 if it did. */
int master_refuse_unless_leading(client *c);
/* The term stamped into every capability and the registration reply:
 * the etcd leader key's create revision, or without etcd this process's
 * incarnation (so a restarted master's grants differ from the last's). */
uint64_t master_term(const master *m);
/* INFO fields of leadership: ha_role (single|leader|standby), term, leader. */
void master_leader_info(master *m, resp_buf *out);
/* INFO "# Cluster" (master_cmds.c). */
void master_info(server *srv, resp_buf *out, const char *section);
/* Export master_info's fields on /metrics. */
void master_register_metrics(server *srv);

/* How put items are answered: PUTSTART's one item, MPUTSTART's array,
 * MPUTSTART PACKED's bulk string (proto/placed.h). */
enum { MASTER_PUTS_ONE, MASTER_PUTS_ARRAY, MASTER_PUTS_PACKED };
/* Answer put items in form (one of the above; master_cmds.c). */
void master_reply_puts(client *c, const mm_item *it, size_t n, int form);

/* parked.c: a request answered later (put_wait.c, get_wait.c): its
 * items with their keys copied, in a list, its client blocked. */
typedef struct master_parked {
    client *c;
    mm_item *it;                  /* keys point into keys */
    uint64_t *stamp;              /* items OK when parked: their object's mm_obj_stamp */
    char *keys;
    size_t n;
    int form;                     /* the reply's, MASTER_PUTS_* or MASTER_GETS_* */
    uint32_t replicas;            /* a put's */
    uint64_t t0_ms, deadline_ms;  /* parked at, answered by */
    struct master_parked *next;
} master_parked;
/* Append c's request to *head, its client blocked; answered by
 * now_ms + bound_ms. */
master_parked *master_park(master_parked **head, client *c, const mm_item *it, size_t n, int form,
                           uint64_t now_ms, uint64_t bound_ms);
void master_parked_free(master_parked *p);
void master_parked_free_all(master_parked **head);
size_t master_parked_count(const master_parked *head);
/* The earliest deadline in the list, or next_ms if none is earlier. */
uint64_t master_parked_next(const master_parked *head, uint64_t next_ms);

/* A list of parked requests and what wakes it (put_wait.c, get_wait.c):
 * a timer at the first deadline or the owner's own wake time, and a
 * look before the loop sleeps when the owner says something changed.
 * Each run asks the owner to retry every request and answers those
 * done or past their deadline. */
typedef struct master_park_ops {
    void (*before)(void *owner, uint64_t now_ms);               /* a run starts */
    int (*retry)(void *owner, master_parked *p, uint64_t now_ms); /* 1: answer it now */
    void (*finish)(void *owner, master_parked *p);              /* answer, unblock, free */
    void (*after)(void *owner);                                 /* a run ended */
    uint64_t (*wake_by)(void *owner, uint64_t now_ms);          /* wake by then at the latest */
    int (*changed)(void *owner);                                /* before sleeping: run again? */
    void (*forget)(void *owner, master_parked *p);              /* its client went (may be NULL) */
} master_park_ops;
typedef struct master_park_queue {
    master_parked *head;
    struct sweep *sweep;      /* core/sweep.h: before sleeps, at the first deadline */
    const master_park_ops *ops;
    void *owner;
} master_park_queue;
void master_park_queue_init(master_park_queue *q, event_loop *el, const master_park_ops *ops, void *owner);
void master_park_queue_fini(master_park_queue *q);
/* Park c's request on q and arm its wake-up. */
master_parked *master_park_queue_add(master_park_queue *q, client *c, const mm_item *it, size_t n, int form,
                                     uint64_t now_ms, uint64_t bound_ms);
void master_park_queue_run(master_park_queue *q);
/* c is going: its parked requests leave q (ops->forget, then freed). */
void master_park_queue_forget(master_park_queue *q, client *c);

/* put_wait.c: a put whose items found no room waits up to put_wait_ms
 * for quarantined space (mm_space_due), its client blocked. */
put_wait *put_wait_create(master *m);
void put_wait_destroy(put_wait *w);
/* Park c's request (items as mm_put_start left them): 1 if parked (the
 * reply comes later), 0 if no wait could help (reply now). */
int put_wait_park(put_wait *w, client *c, mm_item *it, size_t n, uint32_t replicas, int form,
                  uint64_t now_ms);
/* c is going: drop its parked request, revoking what was placed for it. */
void put_wait_forget(put_wait *w, client *c);
/* INFO fields: puts_waiting (now), puts_waited, puts_waited_nospace (ever). */
void put_wait_info(const put_wait *w, resp_buf *out);

/* How get items are answered: GET's one item (TRYAGAIN an error, other
 * failures nil), MGET's array (nil per miss), MGETPACKED's bulk string. */
enum { MASTER_GETS_ONE, MASTER_GETS_ARRAY, MASTER_GETS_PACKED };
void master_reply_gets(client *c, const mm_item *it, size_t n, int form);

/* get_wait.c: a get whose keys are loading from disk waits up to
 * get_wait_ms for the loads, its client blocked. */
get_wait *get_wait_create(master *m);
void get_wait_destroy(get_wait *w);
/* Park c's request (items as mm_get left them): 1 if parked (the reply
 * comes later), 0 if no key is loading or waits are off (reply now). */
int get_wait_park(get_wait *w, client *c, mm_item *it, size_t n, int form, uint64_t now_ms);
/* c is going: drop its parked request. */
void get_wait_forget(get_wait *w, client *c);
/* INFO fields: gets_waiting (now), gets_waited, gets_waited_timeout, gets_waited_relooked (ever). */
void get_wait_info(const get_wait *w, resp_buf *out);

/* ---- answers that wait until the nodes hold them (acks.c) ----
 * MOON.PUTEND, MPUTEND, REMOVE and FLUSH bracket their work with
 * acks_begin / acks_end: the reply is sent once every node given a
 * holdings note by the command acknowledged it, its notes were reset,
 * or MASTER_ACK_BOUND_MS passed; -READONLY if this master may no longer
 * lead by then. */
#define MASTER_ACK_BOUND_MS 2000
master_acks *acks_create(master *m);
void acks_destroy(master_acks *a);
void acks_begin(client *c);
void acks_end(client *c);
/* MOON.HOLDINGS took node id's acknowledgement (notes_seq moved). */
void acks_node_acked(master_acks *a, uint32_t id);
/* The metadata is dropped (a lost term): release every waiter. */
void acks_reset(master_acks *a);
/* c is going: its waiting answers are dropped. */
void acks_forget(master_acks *a, client *c);
/* INFO fields acks_waiting, acks_by_nodes, acks_unconfirmed, acks_by_bound. */
void acks_info(const master_acks *a, resp_buf *out);

/* ---- MOON.HOLDINGS ... WAIT (holdings_wait.c, recovery.c) ---- */
enum { MASTER_HOLDINGS_ARRAY = 0, MASTER_HOLDINGS_PACKED, MASTER_HOLDINGS_SLICES };
/* Or'ed into a form: the pull takes the node's tasks too (TASKS), and
 * waits for them as for notes: a load a get waits for goes at once, not
 * with the node's next heartbeat. */
#define MASTER_HOLDINGS_TASKS 0x10
#define MASTER_HOLDINGS_WAIT_MAX 10000   /* ms a pull may wait */
/* Node id's tasks not yet handed out (up to a reply's worth), as an
 * array of tasks (MOON.HEARTBEAT's reply; docs/PROTOCOL.md). */
void master_reply_tasks(client *c, uint32_t id);
/* The reply to a pull of node id in form, after taking ack. */
void master_holdings_reply(client *c, uint32_t id, uint64_t ack, int form);
holdings_wait *holdings_wait_create(master *m);
void holdings_wait_destroy(holdings_wait *h);
/* Park c's pull (nothing to send now): answered before the loop sleeps
 * once node has notes (or its notes were reset), else after wait_ms. */
void holdings_wait_park(holdings_wait *h, client *c, uint32_t node, int form, uint64_t wait_ms);
/* Answer every parked pull now (the metadata was dropped). */
void holdings_wait_reset(holdings_wait *h);
void holdings_wait_forget(holdings_wait *h, client *c);
/* INFO fields holdings_parked (now), holdings_waits, holdings_waits_noted (ever). */
void holdings_wait_info(const holdings_wait *h, resp_buf *out);

/* ---- the member records in etcd (members.c) ----
 * With --etcd the leader records each node under
 * /moonkv/<cluster>/nodes/<id> before it answers the node's MOON.REGISTER
 * and deletes the record once the node is dead (or never came back to a
 * rebuild window). A new leader reads them at its term's start
 * (master_rebuild_members): a node that joined just before the last
 * leader died is in no other node's view, but it is in etcd. etcd calls
 * block, so they run on a thread of the module's own, in order, each
 * bounded; a registration waits for its record with its client blocked,
 * and gets -TRYAGAIN if etcd did not take it. Writes are guarded by the
 * leader key's create revision (the term): a deposed leader writes none. */
master_members *members_create(master *m, char *err, size_t errlen);
void members_free(master_members *ms);
/* A term began (term > 0: read the records) or ended (0). */
void members_term(master_members *ms, int64_t term);
/* Before registering j: 1 if c now waits for j's record (or was refused);
 * 0 if j's id is recorded already (register it now). NULL ms: 0. */
int members_park(master_members *ms, client *c, master_join *j);
/* c is going: forget its waiting registration. */
void members_forget(master_members *ms, client *c);
/* The id recorded in etcd for the node process of this token (MOON.REGISTER
 * INSTANCE) that has not joined this term, or 0: a node the last leader
 * recorded whose reply it never got, now registering without an id. */
uint32_t members_recorded_as(master_members *ms, uint64_t instance);
/* Sweep: delete the records of dead nodes, read the records again if that failed. */
void members_tick(master_members *ms);
/* INFO fields members_*. */
void members_info(const master_members *ms, resp_buf *out);

/* The master role on an initialised server (master_role.c); the process
 * exit code. */
int master_role_main(server *srv);

#endif
