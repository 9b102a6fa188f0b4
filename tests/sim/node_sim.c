/* tests/sim/node_sim.c - many memory nodes in one process, without segments.
 *
 *   node_sim --master HOST:PORT --nodes N [--segment BYTES] [--holdings-ms MS]
 *            [--heartbeat-ms MS] [--secret S] [--silence-after MS --silence-every K]
 *
 * Speaks the node's control protocol for N node ids, one connection each
 * (the master binds a node to the connection that registered it):
 * MOON.CHALLENGE and MOON.REGISTER with the cluster-secret proof, then
 * MOON.HEARTBEAT every heartbeat (the master's figure unless given), and
 * MOON.HOLDINGS (packed) every holdings period, acknowledging the notes so
 * the master's queues stay short. It has no segment and no data plane: a
 * copy task is answered MOON.COPYDONE FAIL (it cannot make the copy), a
 * NODEDEAD answer makes it register again under its id, as a node does.
 * What it tells the master is what it is: a segment of --segment bytes
 * that nothing writes (the master only places into it), at the data
 * address 127.0.0.1:<10000 + index> where nothing listens.
 *
 * Commands on stdin, one a line: "silence ID ..." stops heartbeats and
 * pulls of those ids (their connections stay open, as a hung node's do),
 * "quit" ends. --silence-after MS --silence-every K does the same without
 * a parent at the other end of stdin: MS after registering, every K-th id
 * goes silent, and "silenced WALL_MS ID ..." says when and which. On
 * stdout: "registered N ids FIRST..LAST" once every node is a member,
 * "stats ..." every 10 s. The secret: --secret, else
 * $MOONKV_CLUSTER_SECRET, else "" (a cluster without one). */
#include <errno.h>
#include <hiredis/hiredis.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/siphash.h"
#include "core/util.h"
#include "proto/cmd.h"
#include "proto/register.h"
#include "proto/status.h"

typedef struct sim_node {
    redisContext *rc;
    uint32_t id;                  /* 0 until registered */
    char instance[17];            /* this id's process token, as hex */
    uint64_t ack;                 /* holdings acknowledged up to */
    uint64_t next_hb_ms, next_pull_ms;
    int silenced;
    int pending;                  /* replies to read this round */
    uint64_t fail[64];            /* copy tasks to answer FAIL */
    int nfail;
} sim_node;

typedef struct sim {
    const char *host;
    int port;
    const char *secret;
    uint64_t segment;
    int heartbeat_ms, holdings_ms;
    int nnodes;
    sim_node *nodes;
    int silence_after_ms, silence_every;
    uint64_t heartbeats, pulls, notes_bytes, tasks_failed, reregistered, errors;
} sim;

static void die(const char *fmt, const char *arg) {
    fprintf(stderr, "node_sim: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(1);
}

static redisContext *sim_connect(const sim *s) {
    struct timeval tv = {30, 0};
    redisContext *rc = redisConnectWithTimeout(s->host, s->port, tv);
    if (!rc || rc->err) die("cannot connect to the master: %s", rc ? rc->errstr : "out of memory");
    redisSetTimeout(rc, tv);
    return rc;
}

static redisReply *get_reply(sim_node *n) {
    void *r = NULL;
    if (redisGetReply(n->rc, &r) != REDIS_OK || !r) die("lost the master: %s", n->rc->errstr);
    return r;
}

/* cmd out on n's connection, built by proto's encoders as a node's are,
 * so the simulator speaks what the node speaks. */
static void append_cmd(sim_node *n, proto_cmd *cmd) {
    redisAppendCommandArgv(n->rc, cmd->argc, cmd->argv, cmd->lens);
    proto_cmd_free(cmd);
}

static void append_challenge(sim_node *n) {
    proto_cmd cmd;
    proto_cmd_bare(&cmd, PROTO_VERB_CHALLENGE);
    append_cmd(n, &cmd);
}

/* The MOON.REGISTER for node i after its MOON.CHALLENGE reply r. */
static void append_register(const sim *s, int i, const redisReply *r) {
    sim_node *n = &s->nodes[i];
    if (r->type != REDIS_REPLY_STRING || r->len != PROTO_NONCE_LEN)
        die("MOON.CHALLENGE refused: %s", r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    uint8_t key[PROTO_REG_KEY_LEN], proof[PROTO_PROOF_LEN];
    char hex[2 * PROTO_PROOF_LEN + 1], addr[32];
    proto_reg_key(s->secret, key);
    proto_reg_proof(key, (const uint8_t *)r->str, proof);
    hex_encode(proof, sizeof proof, hex);
    snprintf(addr, sizeof addr, "127.0.0.1:%d", 10000 + i);
    const char *addrs[1] = {addr};
    /* claim_id: back under our id after a NODEDEAD (0 the first time) */
    proto_register_args ra = {.proof_hex = hex, .segment_size = s->segment, .addrs = addrs, .naddrs = 1,
                              .claim_id = n->id, .claim_again = 1, .instance_hex = n->instance};
    proto_cmd cmd;
    proto_cmd_register(&cmd, &ra);
    append_cmd(n, &cmd);
}

/* Its id from a MOON.REGISTER reply: 0, 1 if the master asks us to try
 * again shortly (TRYAGAIN: a restarted master waits for old ids first);
 * dies on a refusal. */
static int take_register(sim *s, sim_node *n, const redisReply *r) {
    if (r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == PROTO_TRYAGAIN) return 1;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5 || r->element[0]->type != REDIS_REPLY_INTEGER)
        die("MOON.REGISTER refused: %s", r->type == REDIS_REPLY_ERROR ? r->str : "bad reply");
    n->id = (uint32_t)r->element[0]->integer;
    if (!s->heartbeat_ms) s->heartbeat_ms = (int)r->element[2]->integer;
    n->ack = 0;   /* the master resends what we did not acknowledge */
    return 0;
}

/* Register every node, pipelined across the connections: every
 * challenge goes out, then every registration; again for those asked
 * to wait (at most a minute). */
static void register_all(sim *s) {
    for (int i = 0; i < s->nnodes; i++) {
        sim_node *n = &s->nodes[i];
        n->rc = sim_connect(s);
        uint8_t tok[8];
        if (random_bytes(tok, sizeof tok) != 0) die("%s", "no random bytes");
        hex_encode(tok, sizeof tok, n->instance);
    }
    uint64_t until = mono_ms() + 60000;
    for (int left = s->nnodes; left > 0;) {
        if (mono_ms() > until) die("%s", "the master kept asking us to wait");
        for (int i = 0; i < s->nnodes; i++)
            if (!s->nodes[i].id) append_challenge(&s->nodes[i]);
        for (int i = 0; i < s->nnodes; i++) {
            if (s->nodes[i].id) continue;
            redisReply *r = get_reply(&s->nodes[i]);
            append_register(s, i, r);
            freeReplyObject(r);
        }
        left = 0;
        for (int i = 0; i < s->nnodes; i++) {
            if (s->nodes[i].id) continue;
            redisReply *r = get_reply(&s->nodes[i]);
            left += take_register(s, &s->nodes[i], r);
            freeReplyObject(r);
        }
        if (left) usleep(200 * 1000);
    }
}

/* A node told it is dead registers again (blocking: rare). */
static void reregister(sim *s, sim_node *n) {
    append_challenge(n);
    redisReply *r = get_reply(n);
    append_register(s, (int)(n - s->nodes), r);
    freeReplyObject(r);
    r = get_reply(n);
    int wait = take_register(s, n, r);
    freeReplyObject(r);
    if (!wait) s->reregistered++;   /* else the next heartbeat's NODEDEAD tries again */
}

static int is_status(const redisReply *r, int st) {
    return r->type == REDIS_REPLY_ERROR && proto_status_of_reply(r->str, r->len) == st;
}

/* Tasks in a heartbeat reply: each is answered FAIL (no segment to copy into). */
static void take_tasks(sim *s, sim_node *n, const redisReply *r) {
    for (size_t i = 0; i < r->elements; i++) {
        const redisReply *t = r->element[i];
        if (t->type != REDIS_REPLY_ARRAY || t->elements < 1 || t->element[0]->type != REDIS_REPLY_INTEGER) continue;
        if (n->nfail < (int)(sizeof n->fail / sizeof n->fail[0])) n->fail[n->nfail++] = (uint64_t)t->element[0]->integer;
        s->tasks_failed++;
    }
}

static void append_copydone(sim_node *n) {
    proto_cmd cmd;
    proto_cmd_copydone_begin(&cmd, (size_t)n->nfail);
    for (int i = 0; i < n->nfail; i++) proto_cmd_copydone_add(&cmd, n->fail[i], 0);
    append_cmd(n, &cmd);
    n->nfail = 0;
    n->pending++;
}

/* One pass: every due command out on every connection, then the replies. */
static void round_trip(sim *s, uint64_t now) {
    for (int i = 0; i < s->nnodes; i++) {
        sim_node *n = &s->nodes[i];
        if (n->silenced) continue;
        if (n->nfail) append_copydone(n);
        if (now >= n->next_hb_ms) {
            proto_cmd cmd;
            proto_cmd_heartbeat(&cmd, n->id, 0, 0);
            append_cmd(n, &cmd);
            n->pending++;
            n->next_hb_ms = now + (uint64_t)s->heartbeat_ms;
        }
        if (now >= n->next_pull_ms) {
            proto_cmd cmd;
            proto_cmd_holdings(&cmd, n->id, n->ack, 0, 0);   /* no slice CRCs, answered at once */
            append_cmd(n, &cmd);
            n->pending++;
            n->next_pull_ms = now + (uint64_t)s->holdings_ms;
        }
    }
    for (int i = 0; i < s->nnodes; i++) {
        sim_node *n = &s->nodes[i];
        int dead = 0;
        for (; n->pending > 0; n->pending--) {
            redisReply *r = get_reply(n);
            if (is_status(r, PROTO_NODEDEAD)) dead = 1;
            else if (r->type == REDIS_REPLY_ERROR) s->errors++;
            else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 && r->element[0]->type == REDIS_REPLY_INTEGER &&
                     r->element[1]->type == REDIS_REPLY_STRING) {   /* holdings: [next_ack, blob] */
                n->ack = (uint64_t)r->element[0]->integer;
                s->notes_bytes += r->element[1]->len;
                s->pulls++;
                if (r->element[1]->len) n->next_pull_ms = 0;   /* more may wait: pull again at once */
            } else if (r->type == REDIS_REPLY_ARRAY) {   /* heartbeat: tasks */
                s->heartbeats++;
                take_tasks(s, n, r);
            }
            freeReplyObject(r);
        }
        if (dead && !n->silenced) reregister(s, n);
    }
}

/* Every k-th node goes silent, said on stdout with the wall clock. */
static void silence_every(sim *s, int k) {
    printf("silenced %llu", (unsigned long long)wall_ms());
    for (int i = k - 1; i < s->nnodes; i += k) {
        s->nodes[i].silenced = 1;
        printf(" %u", s->nodes[i].id);
    }
    printf("\n");
    fflush(stdout);
}

/* "silence ID ..." and "quit" from stdin; 1 to stop. */
static int take_command(sim *s, char *line) {
    char *tok = strtok(line, " \t\r\n");
    if (!tok) return 0;
    if (strcmp(tok, "quit") == 0) return 1;
    if (strcmp(tok, "silence") != 0) {
        fprintf(stderr, "node_sim: unknown command '%s'\n", tok);
        return 0;
    }
    while ((tok = strtok(NULL, " \t\r\n"))) {
        uint32_t id = (uint32_t)strtoul(tok, NULL, 10);
        for (int i = 0; i < s->nnodes; i++)
            if (s->nodes[i].id == id) s->nodes[i].silenced = 1;
    }
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: node_sim --master HOST:PORT --nodes N [--segment BYTES] [--holdings-ms MS]"
                    " [--heartbeat-ms MS] [--secret S] [--silence-after MS --silence-every K]\n");
    exit(2);
}

static void parse_args(sim *s, int argc, char **argv) {
    static char host[256];
    const char *master = NULL;
    s->secret = getenv("MOONKV_CLUSTER_SECRET") ? getenv("MOONKV_CLUSTER_SECRET") : "";
    s->segment = 1ULL << 40;
    s->holdings_ms = 1000;
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (strcmp(o, "--master") == 0) master = v;
        else if (strcmp(o, "--nodes") == 0) s->nnodes = atoi(v);
        else if (strcmp(o, "--segment") == 0) { if (parse_size(v, &s->segment) != 0) usage(); }
        else if (strcmp(o, "--holdings-ms") == 0) s->holdings_ms = atoi(v);
        else if (strcmp(o, "--heartbeat-ms") == 0) s->heartbeat_ms = atoi(v);
        else if (strcmp(o, "--secret") == 0) s->secret = v;
        else if (strcmp(o, "--silence-after") == 0) s->silence_after_ms = atoi(v);
        else if (strcmp(o, "--silence-every") == 0) s->silence_every = atoi(v);
        else usage();
    }
    if (argc % 2 == 0 || !master || s->nnodes < 1 || s->nnodes > 100000 || s->holdings_ms < 1 ||
        s->heartbeat_ms < 0 || s->silence_every < 0 || parse_hostport(master, host, sizeof host, &s->port) != 0)
        usage();
    s->host = host;
}

int main(int argc, char **argv) {
    sim s = {0};
    parse_args(&s, argc, argv);
    s.nodes = xcalloc((size_t)s.nnodes, sizeof *s.nodes);
    register_all(&s);
    uint32_t lo = UINT32_MAX, hi = 0;
    for (int i = 0; i < s.nnodes; i++) {
        if (s.nodes[i].id < lo) lo = s.nodes[i].id;
        if (s.nodes[i].id > hi) hi = s.nodes[i].id;
    }
    printf("registered %d ids %u..%u heartbeat %d ms\n", s.nnodes, lo, hi, s.heartbeat_ms);
    fflush(stdout);
    char line[65536];
    size_t have = 0;
    int stdin_open = 1;
    uint64_t next_stats = mono_ms() + 10000;
    uint64_t silence_at = s.silence_every ? mono_ms() + (uint64_t)s.silence_after_ms : 0;
    for (;;) {
        uint64_t now = mono_ms();
        round_trip(&s, now);
        if (silence_at && now >= silence_at) {
            silence_every(&s, s.silence_every);
            silence_at = 0;
        }
        if (now >= next_stats) {
            printf("stats heartbeats %llu pulls %llu notes_bytes %llu tasks_failed %llu reregistered %llu errors %llu\n",
                   (unsigned long long)s.heartbeats, (unsigned long long)s.pulls, (unsigned long long)s.notes_bytes,
                   (unsigned long long)s.tasks_failed, (unsigned long long)s.reregistered,
                   (unsigned long long)s.errors);
            fflush(stdout);
            next_stats = now + 10000;
        }
        int tick = s.holdings_ms < s.heartbeat_ms ? s.holdings_ms : s.heartbeat_ms;
        struct pollfd p = {.fd = stdin_open ? 0 : -1, .events = POLLIN};
        if (poll(&p, 1, tick < 20 ? tick : 20) > 0) {
            ssize_t got = read(0, line + have, sizeof line - 1 - have);
            if (got <= 0) {
                if (got < 0 && errno == EINTR) continue;
                stdin_open = 0;   /* no more commands (e.g. /dev/null): run until killed */
                continue;
            }
            have += (size_t)got;
            line[have] = 0;
            char *nl;
            while ((nl = strchr(line, '\n'))) {
                *nl = 0;
                if (take_command(&s, line)) goto out;
                have -= (size_t)(nl + 1 - line);
                memmove(line, nl + 1, have + 1);
            }
            if (have == sizeof line - 1) have = 0;   /* a line too long: dropped */
        }
    }
out:
    for (int i = 0; i < s.nnodes; i++) redisFree(s.nodes[i].rc);
    free(s.nodes);
    return 0;
}
