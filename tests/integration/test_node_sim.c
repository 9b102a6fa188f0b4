/* test_node_sim - a master with 1,000 nodes (200 under the sanitizers),
 * all in one node simulator (tests/sim/node_sim: registration with the
 * cluster-secret proof, heartbeats at the master's 1 s, holdings pulls):
 * every node registers and stays alive, and when every 50th id goes
 * silent each of them is declared dead within the node timeout plus a
 * sweep (bounded generously: 3 s more, 6 s under the sanitizers), while no other node dies.
 * The master's CPU share over the run is printed, not asserted (the
 * machine is shared; make bench measures it).
 * Ports: h_free_ports, taken first in main(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_harness.h"
#include "test.h"

#if H_SANITIZED
#define NODES 200
#else
#define NODES 1000
#endif
#define EVERY       50          /* every 50th id goes silent */
#define SILENT      (NODES / EVERY)
#define TIMEOUT_MS  5000        /* the master's node timeout (its default) */
#define SECRET      "sim-secret"  /* proved by every simulated node */
/* A sweep (1 s at this timeout), polling, a loaded machine: the product's
 * speed, so twice that under the sanitizers (the SAN master, 200 nodes
 * polled at load 30, was seen at 8.3 s against 8) */
#define SLACK_MS    (3000 * H_TIME_SCALE)

static int port;
static pid_t master_pid, sim_pid;
static char sim_out[64];

/* The simulator next to this binary: build/X/tests/sim/node_sim. */
static const char *sim_bin(void) {
    static char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
    if (n <= 0) return "node_sim";
    path[n] = 0;
    char *slash = strrchr(path, '/');
    if (slash) *slash = 0;   /* .../tests/integration */
    slash = strrchr(path, '/');
    if (slash) strcpy(slash, "/sim/node_sim");
    return path;
}

/* The simulator's first stdout line starting with word, within ms. */
static int sim_line(const char *word, char *line, size_t len, int ms) {
    uint64_t end = mono_ms() + (uint64_t)ms;
    do {
        FILE *f = fopen(sim_out, "r");
        while (f && fgets(line, (int)len, f))
            if (strncmp(line, word, strlen(word)) == 0) {
                fclose(f);
                return 0;
            }
        if (f) fclose(f);
        usleep(100 * 1000);
    } while (mono_ms() < end);
    return -1;
}

/* MOON.NODES: state[id] = 'a'live, 'd'ead, ...; how many lines. */
static int node_states(redisContext *c, char *state, int max) {
    redisReply *r = redisCommand(c, "MOON.NODES");
    int n = 0;
    if (r && r->type == REDIS_REPLY_STRING) {
        char *save = NULL, *text = strdup(r->str);
        for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
            unsigned id;
            char addr[64], st[16];
            if (sscanf(l, "%u %63s %15s", &id, addr, st) == 3 && id < (unsigned)max) state[id] = st[0], n++;
        }
        free(text);
    }
    if (r) freeReplyObject(r);
    return n;
}

static double master_cpu_s(void) { return h_cpu_s(master_pid); }

static void test_thousand_nodes_die_on_time(void) {
    char line[65536], master[32];
    snprintf(master, sizeof master, "127.0.0.1:%d", port);
    snprintf(sim_out, sizeof sim_out, "/tmp/test_node_sim.%d.out", (int)getpid());
    h_args a = {0};
    h_arg(&a, sim_bin());
    h_argv(&a, (const char *const[]){"--master", master, "--secret", SECRET, "--holdings-ms", "1000", "--silence-after", "8000", NULL});
    h_arg(&a, "--nodes");
    h_argf(&a, "%d", NODES);
    h_arg(&a, "--silence-every");
    h_argf(&a, "%d", EVERY);
    sim_pid = h_spawn_ex(a.v, sim_out, NULL);
    ASSERT(sim_pid > 0);
    ASSERT_EQ(sim_line("registered", line, sizeof line, 60000), 0);
    printf("# %s", line);
    redisContext *c = h_redis(port);
    ASSERT(c != NULL);
    static char state[NODES + 2];
    double cpu0 = master_cpu_s();
    uint64_t t0 = mono_ms();
    ASSERT_EQ(sim_line("silenced", line, sizeof line, 30000), 0);
    double share = (master_cpu_s() - cpu0) * 1000.0 / (double)(mono_ms() - t0);
    ASSERT_EQ(node_states(c, state, NODES + 2), NODES);
    int alive = 0;
    for (int id = 1; id <= NODES; id++) alive += state[id] == 'a';
    printf("# %d nodes alive before the silence, master CPU %.1f %% of a core meanwhile\n", alive, share * 100);
    ASSERT_EQ(alive, NODES);   /* none died while all heartbeat */

    /* "silenced WALL_MS id id ..." */
    uint64_t silenced_ms = strtoull(line + strlen("silenced "), NULL, 10);
    uint32_t ids[SILENT];
    int nids = 0;
    char *p = strchr(line + strlen("silenced "), ' ');
    while (p && nids < SILENT) {
        ids[nids++] = (uint32_t)strtoul(p, &p, 10);
        while (*p == ' ') p++;
        if (*p == '\n' || !*p) break;
        p--;
    }
    ASSERT_EQ(nids, SILENT);
    uint64_t dead_at[SILENT] = {0}, end = silenced_ms + TIMEOUT_MS + SLACK_MS + 5000;
    int dead = 0;
    while (dead < nids && wall_ms() < end) {
        node_states(c, state, NODES + 2);
        uint64_t now = wall_ms();
        for (int i = 0; i < nids; i++)
            if (!dead_at[i] && state[ids[i]] == 'd') dead_at[i] = now, dead++;
        usleep(100 * 1000);
    }
    uint64_t worst = 0;
    for (int i = 0; i < nids; i++) {
        ASSERT_MSG(dead_at[i] != 0, "node %u never declared dead", ids[i]);
        uint64_t took = dead_at[i] - silenced_ms;
        if (took > worst) worst = took;
    }
    printf("# %d silent nodes of %d declared dead at most %llu ms after their silence (timeout %d ms)\n", nids,
           NODES, (unsigned long long)worst, TIMEOUT_MS);
    ASSERT_MSG(worst <= TIMEOUT_MS + SLACK_MS, "declared dead %llu ms after the silence", (unsigned long long)worst);
    node_states(c, state, NODES + 2);
    int now_dead = 0;
    for (int id = 1; id <= NODES; id++) now_dead += state[id] == 'd';
    ASSERT_EQ(now_dead, nids);   /* only the silent ones */
    redisFree(c);
}

int main(void) {
    h_init(240);
    h_setup_or_exit(port = h_free_ports(1), "free ports");
    const char *mflags[] = {"--node-timeout-ms", "5000", "--heartbeat-ms", "1000", "--cluster-secret", SECRET, NULL};
    master_pid = h_start_master(port, mflags);
    h_setup_or_exit(master_pid, "master");
    RUN_TEST(test_thousand_nodes_die_on_time);
    h_kill_all();
    unlink(sim_out);
    TEST_EXIT();
}
