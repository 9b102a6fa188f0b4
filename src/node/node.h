/* node/node.h - the memory node role: state shared by its threads.
 *
 * Threads: the event loop (the node's RESP port: PING, INFO, MOON.DRAIN),
 * the control thread (control.h: registration, heartbeats, leave, the
 * index of what we hold and reporting it, on its own master connection), the copier (copier.h: copy tasks through the
 * transfer engine) and the data servers' threads (data_plane.h). They
 * share only `status`, under `mu`. */
#ifndef MKV_NODE_H
#define MKV_NODE_H

#include <pthread.h>
#include <stdint.h>

#include "node/data_plane.h"
#include "node/index.h"
#include "backend/shares.h"
#include "node/segment.h"
#include "server/server.h"

typedef enum node_phase {
    NODE_JOINING = 0,   /* not registered (yet, or again) */
    NODE_MEMBER,        /* registered, heartbeating */
    NODE_LEAVING,       /* LEAVE sent: serving reads while the master drains us */
    NODE_GONE           /* drained (or gave up): the process should exit */
} node_phase;

typedef struct node_status {
    node_phase phase;
    uint32_t id;                   /* 0 until registered */
    uint64_t registrations;
    uint64_t master_term;          /* of the master we registered with last */
    uint64_t heartbeats, heartbeat_errors;
    uint64_t master_segment, master_used;   /* from MOON.NODES */
    char master_state[16];                  /* "alive", "draining", ... */
    uint64_t tasks_received, tasks_ok, tasks_failed;
    uint64_t tasks_pulled;         /* of tasks_received: on the holdings link, not a heartbeat */
    uint64_t bytes_copied;
    uint64_t holdings_pulls, holdings_notes;   /* MOON.HOLDINGS answered, notes applied */
    int holdings_linked;                       /* pulling on the holdings link now */
    char master[CONFIG_STR_MAX];            /* the master we talk to ("host:port") */
    int left;                               /* the master drained us: our bytes are nobody's */
} node_status;

/* A master group the node serves (one, unnamed, unless --shared-groups). Each
 * has its own control thread, holdings link and status; a shared node
 * (--shared-groups) gives each whole chunks of its segment (shares). */
#define NODE_MAX_GROUPS TE_MAX_SHARES
typedef struct node_group {
    char name[32];                 /* "": the node serves one master */
    char cluster[CONFIG_STR_MAX];  /* its etcd prefix (cluster_name, or <cluster>/g/<name>) */
    node_status *st;               /* &node.status for the first, else &own (under node.mu) */
    node_status own;
    struct node_control *ctl;
} node_group;

typedef struct node {
    server *srv;
    int ngroups;                   /* >= 1; grows (under mu) as the slot map names groups (shares.c) */
    int leaving;                   /* asked to leave (under mu): a group added now leaves too */
    struct shares_follow *follow;  /* --shared-groups map: the map's new groups joined as they come */
    node_group groups[NODE_MAX_GROUPS];
    struct te_shares *shares;      /* --shared-groups: which group holds which chunk; NULL: one master */
    uint32_t shared_id;            /* --shared-groups: our id in every group (from etcd, or the segment file's) */
    pthread_mutex_t shares_mu;     /* the chunks' file (shares.c): one writer at a time */
    int ngone;                     /* control threads that ended (under mu) */
    node_segment seg;
    struct node_persist *persist;  /* the segment's file (persist.h), NULL: a memfd */
    struct disk_store *disk;       /* the disk tier (disk_tier.h), NULL: none */
    te_disk_reader disk_reader;    /* its reader for the data servers (TE_READ_DISK) */
    node_data *data;
    node_index *index;             /* what the segment's bytes are (control thread writes) */
    struct node_control *ctl;      /* groups[0]'s */
    struct node_copier *copier;
    pthread_mutex_t mu;
    node_status status;
    loop_wake *gone;               /* control thread -> loop: we left */
    loop_timer *leave_timer;       /* bounds the wait for the master's drain */
} node;

const char *node_phase_name(node_phase p);
/* n->ngroups, read under n->mu (it grows while the node runs). */
int node_ngroups(node *n);

/* The node role on an initialised server (node_role.c); the process
 * exit code. */
int node_role_main(server *srv);

#endif
