/* proto/limits.h - the bounds of the MOON.* protocol (docs/PROTOCOL.md).
 *
 * Master, node, client and gateway all take their limits from here, so a
 * key the client accepts is one the master accepts. The transfer engine
 * below keeps its own capacity (backend/engine.h); the asserts say the
 * protocol never asks it for more than it can hold. */
#ifndef MKV_PROTO_LIMITS_H
#define MKV_PROTO_LIMITS_H

#include "backend/engine.h"

#define PROTO_MAX_KEY_LEN   4096    /* bytes of a key */
#define PROTO_MAX_REPLICAS  8       /* replicas of one object */
#define PROTO_MAX_BATCH     4096    /* keys per MOON.M* command */
/* Node ids the wire takes (ids are never reused; dead ones stay listed).
 * A master takes up to its --max-nodes of them (PROTO_DEFAULT_MAX_NODES
 * unless configured): its node table grows as ids come, a pointer per id. */
#define PROTO_MAX_NODES     ((1u << 24) - 1)
#define PROTO_DEFAULT_MAX_NODES 65536
#define PROTO_MAX_EXTENTS   4096    /* extents of one replica or one side of a copy task */
#define PROTO_MAX_TASKS     1024    /* copy tasks per MOON.HEARTBEAT reply */
#define PROTO_MAX_TASK_EXTENTS 65536   /* extents of a reply's tasks together (one task may exceed it) */
#define PROTO_MAX_COPYDONE  4096    /* task outcomes per MOON.COPYDONE */
#define PROTO_MAX_SUSPECTS  16      /* node ids per MOON.SUSPECT */
/* A node without a master tries to join at least this often, so a
 * restarted master hears every live node of its past within it (the
 * master's rejoin_grace_ms is a few of these). */
#define PROTO_REJOIN_MS     500
#define PROTO_NONCE_LEN     16      /* MOON.CHALLENGE's nonce */
#define PROTO_PROOF_LEN     16      /* MOON.REGISTER's proof (sent as 32 hex digits) */
#define PROTO_MAX_SEGMENT   (1ULL << 50)   /* bytes of a node's segment, and so of any offset */
#define PROTO_ERR_LEN       160     /* a status message, without its word */
#define PROTO_SCAN_COUNT_DEFAULT 10 /* MOON.SCAN without COUNT */
#define PROTO_MAX_SCAN_COUNT 4096   /* MOON.SCAN's COUNT is capped here */
#define PROTO_SCAN_VISITS_PER_KEY 10   /* buckets one MOON.SCAN may visit per key asked */

_Static_assert(PROTO_MAX_REPLICAS <= TE_ENGINE_MAX_REPLICAS,
               "the engine must hold every replica the protocol allows");
_Static_assert(PROTO_MAX_EXTENTS <= TE_ENGINE_MAX_EXTENTS,
               "the engine must hold every extent the protocol allows");

#endif
