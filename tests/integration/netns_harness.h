/* tests/integration/netns_harness.h - network namespaces joined to ours
 * by veth pairs, so test traffic really crosses interfaces:
 *
 *   here:                 veth mkv<id>h<N>  10.201.N.1/24
 *   netns mkvtest-<pid>-N: veth mkv<id>n<N>  10.201.N.2/24, default via .1
 *
 * A process in namespace N reaches 10.201.M.1 (an address of ours) over
 * its own veth, with no forwarding. Needs root and `ip netns`; whatever
 * was created is deleted by netns_teardown, which the cluster harness
 * runs on every exit path once installed as h_cleanup_hook. */
#ifndef MKV_NETNS_HARNESS_H
#define MKV_NETNS_HARNESS_H

#include <fcntl.h>
#include <sys/file.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define NETNS_MAX 4

typedef struct netns_set {
    int n;
    char name[NETNS_MAX][32];
    char veth_host[NETNS_MAX][32], veth_ns[NETNS_MAX][32];   /* names fit IFNAMSIZ: at most 10 chars */
    int made[NETNS_MAX];
    char why[640];               /* first failure, for the skip note */
} netns_set;

static netns_set netns;

/* Run a shell command quietly; on failure keep its first stderr line. */
static inline int netns_sh(const char *fmt, ...) {
    char cmd[400], errf[64], full[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    snprintf(errf, sizeof errf, "/tmp/mkvtest-%d.err", (int)getpid());
    snprintf(full, sizeof full, "%s >/dev/null 2>%s", cmd, errf);
    int rc = system(full);
    if (rc != 0 && !netns.why[0]) {
        char line[160] = "";
        FILE *f = fopen(errf, "r");
        if (f) {
            if (!fgets(line, sizeof line, f)) line[0] = 0;
            fclose(f);
        }
        line[strcspn(line, "\n")] = 0;
        snprintf(netns.why, sizeof netns.why, "'%s' failed: %s", cmd,
                 line[0] ? line : "no message");
    }
    unlink(errf);
    return rc;
}

/* Deleting a namespace destroys its veth end and with it the pair; the
 * host end is deleted too in case the move into the namespace failed. */
static inline void netns_teardown(void) {
    for (int i = 0; i < netns.n; i++) {
        if (!netns.made[i]) continue;
        netns_sh("ip netns del %s", netns.name[i]);
        netns_sh("ip link del %s", netns.veth_host[i]);
        netns.made[i] = 0;
    }
}

/* 0, or -1 with the reason in netns.why (not root, no ip netns, ...). */
static inline int netns_setup(int n) {
    if (geteuid() != 0) {
        snprintf(netns.why, sizeof netns.why, "not root");
        return -1;
    }
    /* Every namespace test uses 10.201.N: one at a time per machine. The
     * lock lives as long as the process (its fd is never closed). */
    int lock = open("/tmp/moonkv-netns.lock", O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    if (lock >= 0) (void)flock(lock, LOCK_EX);
    unsigned id = (unsigned)getpid() % 100000;
    netns.n = n > NETNS_MAX ? NETNS_MAX : n;
    for (int i = 0; i < netns.n; i++) {
        int k = i + 1;
        snprintf(netns.name[i], sizeof netns.name[i], "mkvtest-%d-%d", (int)getpid(), k);
        snprintf(netns.veth_host[i], sizeof netns.veth_host[i], "mkv%uh%d", id, k);
        snprintf(netns.veth_ns[i], sizeof netns.veth_ns[i], "mkv%un%d", id, k);
        if (netns_sh("ip netns add %s", netns.name[i]) != 0) return -1;
        netns.made[i] = 1;
        const char *ns = netns.name[i], *vh = netns.veth_host[i], *vn = netns.veth_ns[i];
        if (netns_sh("ip link add %s type veth peer name %s", vh, vn) != 0 ||
            netns_sh("ip link set %s netns %s", vn, ns) != 0 ||
            netns_sh("ip addr add 10.201.%d.1/24 dev %s", k, vh) != 0 ||
            netns_sh("ip link set %s up", vh) != 0 ||
            netns_sh("ip -n %s addr add 10.201.%d.2/24 dev %s", ns, k, vn) != 0 ||
            netns_sh("ip -n %s link set %s up", ns, vn) != 0 ||
            netns_sh("ip -n %s link set lo up", ns) != 0 ||
            netns_sh("ip -n %s route add default via 10.201.%d.1", ns, k) != 0)
            return -1;
    }
    return 0;
}

/* Bytes through our end of veth i; dir "tx" (towards the namespace) or "rx". */
static inline uint64_t netns_veth_bytes(int i, const char *dir) {
    char path[128];
    snprintf(path, sizeof path, "/sys/class/net/%s/statistics/%s_bytes", netns.veth_host[i], dir);
    unsigned long long v = 0;
    FILE *f = fopen(path, "r");
    if (f) {
        if (fscanf(f, "%llu", &v) != 1) v = 0;
        fclose(f);
    }
    return v;
}

#endif
