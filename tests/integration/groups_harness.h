/* tests/integration/groups_harness.h - what the tests of master groups
 * (test_groups, test_groups_shared) share: the start of a run with an
 * etcd, a libmoonkv client routing over the groups, and the operator's
 * slot tool (scripts/moonkv-slots). */
#ifndef MKV_GROUPS_HARNESS_H
#define MKV_GROUPS_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "client/moonkv.h"
#include "etcd_harness.h"

/* The start of main: 1 if etcd is not installed (a SKIP line said for
 * name: the caller returns 0); else the harness armed for time_limit_s
 * with cleanup (the etcd's data dir), nports free ports from *port0 and
 * etcd up on two of them (etcd_at, etcd_at + 1): 0, or -1 (said). */
static inline int h_groups_begin(const char *name, int time_limit_s, void (*cleanup)(void), int nports, int *port0,
                                 h_etcd *etcd, int etcd_at) {
    if (system("command -v etcd >/dev/null 2>&1") != 0) {
        printf("ok - %s # SKIP etcd not installed (Debian package etcd-server)\n", name);
        return 1;
    }
    h_init(time_limit_s);
    h_cleanup_hook = cleanup;
    h_setup_or_exit(*port0 = h_free_ports(nports), "free ports");
    return h_etcd_up(etcd, *port0 + etcd_at, *port0 + etcd_at + 1);
}

/* A client over the groups of cluster (secret may be NULL, transport
 * NULL: the default), timeout_ms per call: MKV_OK or its error. */
static inline int h_groups_client_ms(mkv_client **mc, const h_etcd *etcd, const char *cluster, const char *secret,
                                     const char *transport, int timeout_ms) {
    mkv_options opt;
    mkv_options_init(&opt);
    opt.etcd = etcd->url;
    opt.cluster_name = cluster;
    if (secret) opt.cluster_secret = secret;
    if (transport) opt.transport = transport;
    opt.groups = 1;
    opt.timeout_ms = timeout_ms;
    return mkv_connect(mc, &opt);
}

/* The same, 10 s per call (a loaded etcd delays the masters' map reads,
 * TRYAGAIN meanwhile). */
static inline int h_groups_client(mkv_client **mc, const h_etcd *etcd, const char *cluster, const char *secret,
                                  const char *transport) {
    return h_groups_client_ms(mc, etcd, cluster, secret, transport, 10000);
}

/* The operator's tool (scripts/moonkv-slots, beside the tests' sources)
 * on etcd for cluster: its exit code; its output into out (may be NULL). */
static inline int h_slots_tool(const h_etcd *etcd, const char *cluster, const char *args, char *out, size_t len) {
    char cmd[768], dir[256];
    snprintf(dir, sizeof dir, "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = '\0';
    else snprintf(dir, sizeof dir, ".");
    snprintf(cmd, sizeof cmd, "python3 %s/../../scripts/moonkv-slots --etcd %s --cluster %s %s 2>&1", dir, etcd->url,
             cluster, args);
    if (out && len) out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p) return -1;
    char line[256];
    size_t at = 0;
    while (fgets(line, sizeof line, p))
        if (out && at + 1 < len) at += (size_t)snprintf(out + at, len - at, "%s", line);
    int rc = pclose(p);
    return rc == -1 ? -1 : WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

#endif
