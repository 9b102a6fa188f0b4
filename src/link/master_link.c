/* link/master_link.c - see master_link.h. */
#include "link/master_link.h"
#include "proto/reply_bound.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"
#include "proto/cmd.h"
#include "proto/register.h"

const char *proto_master_hint(const char *error_reply) {
    if (error_reply && strncasecmp(error_reply, "NOAUTH", 6) == 0)
        return " (the master has requirepass: set master_auth / --master-auth)";
    if (error_reply && strncasecmp(error_reply, "WRONGPASS", 9) == 0)
        return " (check master_auth / --master-auth)";
    return "";
}

static int link_auth(redisContext *rc, const char *password, char *err, size_t errlen) {
    const char *argv[2] = {"AUTH", password};
    size_t lens[2] = {4, strlen(password)};
    redisReply *r = redisCommandArgv(rc, 2, argv, lens);
    if (!r) {
        snprintf(err, errlen, "AUTH: %s", rc->errstr);
        return -1;
    }
    int ok = r->type == REDIS_REPLY_STATUS;
    if (!ok)
        snprintf(err, errlen, "the master refused AUTH: %s%s",
                 r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply",
                 r->type == REDIS_REPLY_ERROR ? proto_master_hint(r->str) : "");
    freeReplyObject(r);
    return ok ? 0 : -1;
}

int proto_prove_arg(const redisReply *r, const char *secret, char hex[2 * PROTO_PROOF_LEN + 1],
                    char *err, size_t errlen) {
    if (r && r->type == REDIS_REPLY_STRING && proto_member_proof_hex(secret, r->str, r->len, hex) == 0)
        return 0;
    snprintf(err, errlen, "the master refused %s: %s%s", PROTO_VERB_CHALLENGE,
             !r ? "no reply" : r->type == REDIS_REPLY_ERROR ? r->str : "not a nonce",
             r && r->type == REDIS_REPLY_ERROR ? proto_master_hint(r->str) : "");
    return -1;
}

int proto_prove_accepted(const redisReply *r, char *err, size_t errlen) {
    if (r && r->type == REDIS_REPLY_STATUS) return 1;
    /* A master older than MOON.PROVE has no gate to pass. */
    if (r && r->type == REDIS_REPLY_ERROR && strncmp(r->str, "ERR unknown command", 19) == 0) return 1;
    snprintf(err, errlen, "the master refused %s: %s (check cluster_secret / --cluster-secret)", PROTO_VERB_PROVE,
             !r ? "no reply" : r->type == REDIS_REPLY_ERROR ? r->str : "unexpected reply");
    return 0;
}

/* One command of the proof (freed): its reply, or NULL with err (link lost). */
static redisReply *prove_step(redisContext *rc, proto_cmd *cmd, char *err, size_t errlen) {
    redisReply *r = redisCommandArgv(rc, cmd->argc, cmd->argv, cmd->lens);
    if (!r) snprintf(err, errlen, "%s: %s", cmd->argv[0], rc->errstr);
    proto_cmd_free(cmd);
    return r;
}

int proto_master_prove(redisContext *rc, const char *secret, char *err, size_t errlen) {
    char hex[2 * PROTO_PROOF_LEN + 1];
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_CHALLENGE);
    redisReply *r = prove_step(rc, &cmd, err, errlen);
    if (!r) return PROTO_LINK_EUNREACH;
    int ok = proto_prove_arg(r, secret, hex, err, errlen) == 0;
    freeReplyObject(r);
    if (!ok) return PROTO_LINK_EAUTH;
    proto_cmd_prove(&cmd, hex);
    if (!(r = prove_step(rc, &cmd, err, errlen))) return PROTO_LINK_EUNREACH;
    ok = proto_prove_accepted(r, err, errlen);
    freeReplyObject(r);
    return ok ? PROTO_LINK_OK : PROTO_LINK_EAUTH;
}

static struct timeval tv_ms(int ms) {
    struct timeval tv = {ms / 1000, (ms % 1000) * 1000};
    return tv;
}

int proto_master_open(redisContext **out, const char *hostport, const char *password,
                      const char *secret, int connect_ms, int io_ms, char *err, size_t errlen) {
    char host[256];
    int port;
    *out = NULL;
    if (parse_hostport(hostport, host, sizeof host, &port) != 0) {
        snprintf(err, errlen, "bad master address '%s' (want host:port)", hostport);
        return PROTO_LINK_EUNREACH;
    }
    redisContext *rc = redisConnectWithTimeout(host, port, tv_ms(connect_ms));
    if (!rc || rc->err || redisSetTimeout(rc, tv_ms(io_ms)) != REDIS_OK) {
        snprintf(err, errlen, "cannot reach the master at %s: %s", hostport,
                 rc ? rc->errstr : "out of memory");
        if (rc) redisFree(rc);
        return PROTO_LINK_EUNREACH;
    }
    proto_reader_bound(rc->reader);
    int code = PROTO_LINK_OK;
    if (password && password[0] && link_auth(rc, password, err, errlen) != 0)
        code = rc->err ? PROTO_LINK_EUNREACH : PROTO_LINK_EAUTH;
    else if (secret)
        code = proto_master_prove(rc, secret, err, errlen);
    if (code != PROTO_LINK_OK) {
        redisFree(rc);
        return code;
    }
    *out = rc;
    return PROTO_LINK_OK;
}
