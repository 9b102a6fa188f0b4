/* proto/verbs.c - see verbs.h. */
#include "proto/verbs.h"

#include <string.h>
#include <strings.h>

const char *const proto_verbs[] = {
    PROTO_VERB_CHALLENGE, PROTO_VERB_PROVE,      PROTO_VERB_REGISTER,   PROTO_VERB_HOLDLINK,
    PROTO_VERB_HEARTBEAT, PROTO_VERB_LEAVE,      PROTO_VERB_DRAIN,      PROTO_VERB_SUSPECT,
    PROTO_VERB_NODES,     PROTO_VERB_TOPOLOGY,   PROTO_VERB_GATEWAY,    PROTO_VERB_HOLDINGS,
    PROTO_VERB_COPYDONE,  PROTO_VERB_BADREPLICA, PROTO_VERB_REPORT,     PROTO_VERB_REPORTDONE,
    PROTO_VERB_REBUILD,   PROTO_VERB_PUTSTART,   PROTO_VERB_MPUTSTART,  PROTO_VERB_PUTEND,
    PROTO_VERB_MPUTEND,   PROTO_VERB_PUTREVOKE,  PROTO_VERB_GET,        PROTO_VERB_MGET,
    PROTO_VERB_MGETPACKED, PROTO_VERB_RELEASE,   PROTO_VERB_MRELEASE,   PROTO_VERB_EXISTS,
    PROTO_VERB_MEXISTS,   PROTO_VERB_PREFIX,     PROTO_VERB_PREFIXPIN,  PROTO_VERB_UNPIN,
    PROTO_VERB_REPIN,
    PROTO_VERB_REMOVE,    PROTO_VERB_MREMOVE,    PROTO_VERB_OBJECT,     PROTO_VERB_SCAN,       PROTO_VERB_FLUSH,
};
const size_t proto_nverbs = sizeof proto_verbs / sizeof proto_verbs[0];

const char *proto_verb_lookup(const char *name, size_t len) {
    for (size_t i = 0; i < proto_nverbs; i++)
        if (strlen(proto_verbs[i]) == len && strncasecmp(proto_verbs[i], name, len) == 0) return proto_verbs[i];
    return NULL;
}
