/* proto/verbs.h - the names of the MOON.* verbs, each spelt once.
 *
 * Clients, gateways, nodes and the master's own messages name a verb by
 * these constants; only the master's and the node's command tables
 * (which map a name to its handler) spell them again, in lower case.
 * proto/cmd.h builds each verb's argument vector; proto/replies.h
 * decodes the replies no other proto/ module decodes.
 *
 * Adding a verb: its name here and in proto_verbs (verbs.c), an encoder
 * in cmd.h, a decoder for a new reply shape in replies.h, a round trip
 * and the cuts of its reply in tests/unit/test_proto_verbs.c, then the
 * handler in the master's or the node's table and its entry in
 * docs/PROTOCOL.md. */
#ifndef MKV_PROTO_VERBS_H
#define MKV_PROTO_VERBS_H

#include <stddef.h>

/* membership and auth */
#define PROTO_VERB_CHALLENGE  "MOON.CHALLENGE"
#define PROTO_VERB_PROVE      "MOON.PROVE"
#define PROTO_VERB_REGISTER   "MOON.REGISTER"
#define PROTO_VERB_HOLDLINK   "MOON.HOLDLINK"
#define PROTO_VERB_CHUNKS     "MOON.CHUNKS"
#define PROTO_VERB_SLOTEXPORT "MOON.SLOTEXPORT"
#define PROTO_VERB_LENT       "MOON.LENT"
#define PROTO_VERB_HEARTBEAT  "MOON.HEARTBEAT"
#define PROTO_VERB_LEAVE      "MOON.LEAVE"
#define PROTO_VERB_DRAIN      "MOON.DRAIN"
#define PROTO_VERB_SUSPECT    "MOON.SUSPECT"
#define PROTO_VERB_NODES      "MOON.NODES"
#define PROTO_VERB_TOPOLOGY   "MOON.TOPOLOGY"
#define PROTO_VERB_GATEWAY    "MOON.GATEWAY"
/* holdings, copies and the rebuild after a master restart */
#define PROTO_VERB_HOLDINGS   "MOON.HOLDINGS"
#define PROTO_VERB_COPYDONE   "MOON.COPYDONE"
#define PROTO_VERB_BADREPLICA "MOON.BADREPLICA"
#define PROTO_VERB_REPORT     "MOON.REPORT"
#define PROTO_VERB_REPORTDONE "MOON.REPORTDONE"
#define PROTO_VERB_REBUILD    "MOON.REBUILD"
/* Not verbs: a heartbeat's field (a node's free disk-tier bytes) and the
 * words in a heartbeat reply's task that make it an offload to the disk
 * tier ([id, key, size, [src...], DISK, crc]) or a load from it ([id,
 * key, size, [dst...], LOAD, crc]), docs/SSD_TIER.md. */
#define PROTO_HB_DISK_FREE    "disk_free"
#define PROTO_TASK_DISK       "DISK"
#define PROTO_TASK_LOAD       "LOAD"
#define PROTO_TASK_PUSH       "PUSH"   /* [id, key, size, [[node, off, len, wcap]...], PUSH, crc] */
/* put */
#define PROTO_VERB_PUTSTART   "MOON.PUTSTART"
#define PROTO_VERB_MPUTSTART  "MOON.MPUTSTART"
#define PROTO_VERB_PUTEND     "MOON.PUTEND"
#define PROTO_VERB_MPUTEND    "MOON.MPUTEND"
#define PROTO_VERB_PUTREVOKE  "MOON.PUTREVOKE"
/* get and its leases */
#define PROTO_VERB_GET        "MOON.GET"
#define PROTO_VERB_MGET       "MOON.MGET"
#define PROTO_VERB_MGETPACKED "MOON.MGETPACKED"
#define PROTO_VERB_RELEASE    "MOON.RELEASE"
#define PROTO_VERB_MRELEASE   "MOON.MRELEASE"
/* keys */
#define PROTO_VERB_EXISTS     "MOON.EXISTS"
#define PROTO_VERB_MEXISTS    "MOON.MEXISTS"
#define PROTO_VERB_PREFIX     "MOON.PREFIX"
#define PROTO_VERB_PREFIXPIN  "MOON.PREFIXPIN"   /* pins: proto/pins.h */
#define PROTO_VERB_UNPIN      "MOON.UNPIN"
#define PROTO_VERB_REPIN      "MOON.REPIN"
#define PROTO_VERB_REMOVE     "MOON.REMOVE"
#define PROTO_VERB_MREMOVE    "MOON.MREMOVE"
#define PROTO_VERB_OBJECT     "MOON.OBJECT"
#define PROTO_VERB_SCAN       "MOON.SCAN"
#define PROTO_VERB_FLUSH      "MOON.FLUSH"

/* Every verb above, in that order (a test checks the list is whole and
 * has no name twice). */
extern const char *const proto_verbs[];
extern const size_t proto_nverbs;

/* The verb named by name[0..len) in any case, or NULL. */
const char *proto_verb_lookup(const char *name, size_t len);

#endif
