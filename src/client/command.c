/* client/command.c - sending proto/cmd.h's argument vectors (binary
 * safe, so keys go out byte for byte) to the master. */
#include "client/client.h"

redisReply *mkv_cmd_run(mkv_client *c, proto_cmd *cmd, int *code) {
    redisReply *r = mkv_command(c, cmd->argc, cmd->argv, cmd->lens, code);
    proto_cmd_free(cmd);
    return r;
}

redisReply *mkv_cmd_run_meanwhile(mkv_client *c, proto_cmd *cmd, int *code, mkv_meanwhile *mw) {
    redisReply *r = mkv_command_meanwhile(c, cmd->argc, cmd->argv, cmd->lens, code, mw);
    proto_cmd_free(cmd);
    return r;
}

const redisReply *mkv_reply_item(const redisReply *r, size_t n, size_t i) {
    if (n == 1) return r;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n) return NULL;
    return r->element[i];
}
