/* client/command.c - master commands as binary-safe argument vectors, so
 * keys (content hashes) go out byte for byte. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"

void mkv_cmd_init(mkv_cmd *cmd, int maxargs) {
    cmd->argc = 0;
    cmd->cap = maxargs;
    cmd->argv = xcalloc((size_t)maxargs, sizeof *cmd->argv);
    cmd->lens = xcalloc((size_t)maxargs, sizeof *cmd->lens);
    cmd->nums = xcalloc((size_t)maxargs, sizeof *cmd->nums);
}

void mkv_cmd_bin(mkv_cmd *cmd, const void *p, size_t len) {
    if (cmd->argc == cmd->cap) abort();   /* callers size the vector exactly */
    cmd->argv[cmd->argc] = p;
    cmd->lens[cmd->argc++] = len;
}

void mkv_cmd_str(mkv_cmd *cmd, const char *s) { mkv_cmd_bin(cmd, s, strlen(s)); }

void mkv_cmd_u64(mkv_cmd *cmd, uint64_t v) {
    if (cmd->argc == cmd->cap) abort();
    char *num = cmd->nums[cmd->argc];
    int len = snprintf(num, sizeof cmd->nums[0], "%" PRIu64, v);
    mkv_cmd_bin(cmd, num, (size_t)len);
}

void mkv_cmd_free(mkv_cmd *cmd) {
    free(cmd->argv);
    free(cmd->lens);
    free(cmd->nums);
    memset(cmd, 0, sizeof *cmd);
}

redisReply *mkv_cmd_run(mkv_client *c, const mkv_cmd *cmd, int *code) {
    return mkv_command(c, cmd->argc, cmd->argv, cmd->lens, code);
}

redisReply *mkv_cmd_run_meanwhile(mkv_client *c, const mkv_cmd *cmd, int *code, mkv_meanwhile *mw) {
    return mkv_command_meanwhile(c, cmd->argc, cmd->argv, cmd->lens, code, mw);
}

const redisReply *mkv_reply_item(const redisReply *r, size_t n, size_t i) {
    if (n == 1) return r;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != n) return NULL;
    return r->element[i];
}
