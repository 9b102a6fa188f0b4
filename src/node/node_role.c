/* node/node_role.c - running a memory node.
 *
 * Start-up: segment, data servers, the node's RESP port, then the
 * control thread registers with the master. The first SIGTERM (or
 * MOON.DRAIN on the node's port) asks the master to drain us; the loop
 * keeps running, and the data servers keep serving reads, until the
 * master says the drain is over or NODE_LEAVE_MAX_MS have passed. A
 * second SIGTERM exits at once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/netio.h"
#include "core/heap_huge.h"
#include "core/log.h"
#include "core/util.h"
#include "node/control.h"
#include "node/copier.h"
#include "node/disk_tier.h"
#include "node/node.h"
#include "node/persist.h"
#include "node/shares.h"
#include "server/commands.h"
#include "server/info.h"
#include "transports/registry.h"

#define NODE_LEAVE_MAX_MS 60000

const char *node_phase_name(node_phase p) {
    switch (p) {
    case NODE_JOINING: return "joining";
    case NODE_MEMBER: return "member";
    case NODE_LEAVING: return "leaving";
    case NODE_GONE: return "gone";
    }
    return "unknown";
}

static node *node_of(server *srv) { return srv->role; }

int node_ngroups(node *n) {
    pthread_mutex_lock(&n->mu);
    int k = n->ngroups;
    pthread_mutex_unlock(&n->mu);
    return k;
}

/* ---- INFO "# Node" and MOON.DRAIN ---- */

/* node_info's fields, as metrics. The data plane is the transfer
 * engine's server side (TCP and shm). */
static const metrics_field node_metrics[] = {
    {"registrations", "moonkv_node_registrations_total", METRIC_COUNTER, NULL,
     "Registrations with the master (1 unless the master forgot us)."},
    {"segment_size", "moonkv_segment_size_bytes", METRIC_GAUGE, NULL, "Memory segment size."},
    {"master_segment_used", "moonkv_segment_used_bytes", METRIC_GAUGE, NULL,
     "Segment bytes in use, as the master last reported."},
    {"heartbeats", "moonkv_node_heartbeats_total", METRIC_COUNTER, NULL, "Heartbeats sent."},
    {"heartbeat_errors", "moonkv_node_heartbeat_errors_total", METRIC_COUNTER, NULL,
     "Heartbeats that failed."},
    {"tasks_received", "moonkv_node_copy_tasks_received_total", METRIC_COUNTER, NULL,
     "Copy tasks received from the master."},
    {"tasks_pulled", "moonkv_node_copy_tasks_pulled_total", METRIC_COUNTER, NULL,
     "Copy tasks that came on the holdings link as soon as the master had them (not with a heartbeat)."},
    {"tasks_ok", "moonkv_node_copy_tasks_total", METRIC_COUNTER, "result=\"ok\"",
     "Copy tasks run, by result."},
    {"tasks_failed", "moonkv_node_copy_tasks_total", METRIC_COUNTER, "result=\"failed\"",
     "Copy tasks run, by result."},
    {"bytes_copied", "moonkv_node_copied_bytes_total", METRIC_COUNTER, NULL, "Bytes copied by copy tasks."},
    {"index_objects", "moonkv_node_index_objects", METRIC_GAUGE, NULL,
     "Objects this node holds a part of, as the master told it."},
    {"index_extents", "moonkv_node_index_extents", METRIC_GAUGE, NULL, "Extents in the node's index."},
    {"index_bytes", "moonkv_node_index_bytes", METRIC_GAUGE, NULL, "Memory of the node's index."},
    {"index_refused", "moonkv_node_index_refused_total", METRIC_COUNTER, NULL,
     "Index entries refused (over the bound or malformed)."},
    {"index_reported", "moonkv_node_index_reported_total", METRIC_COUNTER, NULL,
     "Extents reported to a restarted master."},
    {"checksum_errors", "moonkv_node_checksum_errors_total", METRIC_COUNTER, NULL,
     "Objects whose bytes here no longer matched their CRC32C (dropped)."},
    {"disk_bytes_used", "moonkv_node_disk_bytes", METRIC_GAUGE, "state=\"used\"",
     "Disk tier bytes, used and free (docs/SSD_TIER.md)."},
    {"disk_bytes_free", "moonkv_node_disk_bytes", METRIC_GAUGE, "state=\"free\"",
     "Disk tier bytes, used and free (docs/SSD_TIER.md)."},
    {"disk_objects", "moonkv_node_disk_objects", METRIC_GAUGE, NULL, "Objects in the disk tier."},
    {"disk_writes", "moonkv_node_disk_ops_total", METRIC_COUNTER, "op=\"write\"", "Disk tier records, by op."},
    {"disk_reads", "moonkv_node_disk_ops_total", METRIC_COUNTER, "op=\"read\"", "Disk tier records, by op."},
    {"disk_write_bytes", "moonkv_node_disk_io_bytes_total", METRIC_COUNTER, "op=\"write\"",
     "Disk tier value bytes, by op."},
    {"disk_read_bytes", "moonkv_node_disk_io_bytes_total", METRIC_COUNTER, "op=\"read\"",
     "Disk tier value bytes, by op."},
    {"disk_write_seconds", "moonkv_node_disk_io_seconds_total", METRIC_COUNTER, "op=\"write\"",
     "Time in disk tier writes and reads (divide by the ops for the mean latency)."},
    {"disk_read_seconds", "moonkv_node_disk_io_seconds_total", METRIC_COUNTER, "op=\"read\"",
     "Time in disk tier writes and reads (divide by the ops for the mean latency)."},
    {"disk_checksum_errors", "moonkv_node_disk_checksum_errors_total", METRIC_COUNTER, NULL,
     "Disk tier values that failed their CRC32C on a read (dropped)."},
    {"disk_dropped", "moonkv_node_disk_dropped_records", METRIC_GAUGE, NULL,
     "Disk tier records dropped at start (torn or damaged)."},
    {"disk_io_errors", "moonkv_node_disk_io_errors_total", METRIC_COUNTER, NULL, "Disk tier I/O errors."},
    {"data_bytes_in", "moonkv_transfer_server_bytes_total", METRIC_COUNTER, "direction=\"in\"",
     "Data-plane bytes, by direction."},
    {"data_bytes_out", "moonkv_transfer_server_bytes_total", METRIC_COUNTER, "direction=\"out\"",
     "Data-plane bytes, by direction."},
    {"data_requests", "moonkv_transfer_server_requests_total", METRIC_COUNTER, NULL, "Data-plane requests."},
    {"data_rejected", "moonkv_transfer_server_rejected_total", METRIC_COUNTER, NULL,
     "Data-plane requests answered with an error."},
    {"data_conns_accepted", "moonkv_transfer_server_connections_accepted_total", METRIC_COUNTER, NULL,
     "Data-plane connections accepted."},
    {"data_conns_active", "moonkv_transfer_server_connections", METRIC_GAUGE, NULL,
     "Data-plane connections open."},
    {"data_auth_failures", "moonkv_transfer_server_auth_failures_total", METRIC_COUNTER, NULL,
     "Data-plane connections that failed the cluster secret."},
};

/* A node shared by groups: a line per group (its id, state, master,
 * chunks held, and which: proto/chunks.h's bitmap). */
static void groups_info(node *n, resp_buf *out) {
    if (!n->shares) return;
    int ngroups = node_ngroups(n);
    info_field(out, "groups", "%d", ngroups);
    info_field(out, "chunk_size", "%llu", (unsigned long long)te_shares_chunk_size(n->shares));
    info_field(out, "chunks", "%u", te_shares_nchunks(n->shares));
    for (int g = 0; g < ngroups; g++) {
        pthread_mutex_lock(&n->mu);
        node_status st = *n->groups[g].st;
        pthread_mutex_unlock(&n->mu);
        char key[48], map[PROTO_CHUNKS_TEXT];
        snprintf(key, sizeof key, "group_%s", n->groups[g].name);
        node_shares_text(n, g, map, sizeof map);
        info_field(out, key, "id=%u,state=%s,master=%s,term=%llu,registrations=%llu,chunks=%u,used=%llu,map=%s", st.id,
                   node_phase_name(st.phase), st.master[0] ? st.master : "-", (unsigned long long)st.master_term,
                   (unsigned long long)st.registrations, node_shares_count(n, g),
                   (unsigned long long)st.master_used, strchr(map, ':') + 1);
    }
}

static void node_info(server *srv, resp_buf *out, const char *section) {
    if (!info_wants(section, "node", 1)) return;
    node *n = node_of(srv);
    pthread_mutex_lock(&n->mu);
    node_status st = n->status;
    pthread_mutex_unlock(&n->mu);
    te_server_stats ds;
    node_data_stats(n->data, &ds);
    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
    int naddrs = node_data_addrs(n->data, addrs, TE_MAX_PATHS);

    info_section(out, "Node");
    info_field(out, "node_id", "%u", st.id);
    info_field(out, "master", "%s", st.master);
    info_field(out, "state", "%s", node_phase_name(st.phase));
    info_field(out, "master_state", "%s", st.master_state[0] ? st.master_state : "unknown");
    info_field(out, "registrations", "%llu", (unsigned long long)st.registrations);
    info_field(out, "master_term", "%llu", (unsigned long long)st.master_term);
    info_field(out, "segment_size", "%llu", (unsigned long long)n->seg.size);
    info_field(out, "segment_backing", "%s", n->seg.backing);
    info_field(out, "segment_prefault_ms", "%llu", (unsigned long long)n->seg.prefault_ms);
    node_persist_info(n->persist, out);
    node_disk_info(n->disk, out);
    info_field(out, "master_segment_size", "%llu", (unsigned long long)st.master_segment);
    info_field(out, "master_segment_used", "%llu", (unsigned long long)st.master_used);
    for (int i = 0; i < naddrs; i++) {
        char key[32];
        snprintf(key, sizeof key, "data_addr%d", i);
        info_field(out, key, "%s", addrs[i]);
    }
    info_field(out, "heartbeats", "%llu", (unsigned long long)st.heartbeats);
    info_field(out, "heartbeat_errors", "%llu", (unsigned long long)st.heartbeat_errors);
    info_field(out, "tasks_received", "%llu", (unsigned long long)st.tasks_received);
    info_field(out, "tasks_pulled", "%llu", (unsigned long long)st.tasks_pulled);
    info_field(out, "tasks_ok", "%llu", (unsigned long long)st.tasks_ok);
    info_field(out, "tasks_failed", "%llu", (unsigned long long)st.tasks_failed);
    info_field(out, "bytes_copied", "%llu", (unsigned long long)st.bytes_copied);
    info_field(out, "holdings_linked", "%d", st.holdings_linked);
    info_field(out, "holdings_pulls", "%llu", (unsigned long long)st.holdings_pulls);
    info_field(out, "holdings_notes", "%llu", (unsigned long long)st.holdings_notes);
    node_index_stats ix = {0};
    if (n->index) node_index_get_stats(n->index, &ix);
    info_field(out, "index_objects", "%llu", (unsigned long long)ix.objects);
    info_field(out, "index_extents", "%llu", (unsigned long long)ix.extents);
    info_field(out, "index_bytes", "%llu", (unsigned long long)ix.bytes);
    info_field(out, "index_refused", "%llu", (unsigned long long)ix.refused);
    info_field(out, "index_applied", "%llu", (unsigned long long)ix.applied);
    info_field(out, "index_reported", "%llu", (unsigned long long)ix.reported);
    info_field(out, "checksum_errors", "%llu", (unsigned long long)ix.checksum_errors);
    info_field(out, "scrub_mb_per_s", "%d", n->srv->cfg.scrub_mb_per_s);
    info_field(out, "scrub_bytes", "%llu", (unsigned long long)ix.scrub_bytes);
    info_field(out, "scrub_passes", "%llu", (unsigned long long)ix.scrub_passes);
    info_field(out, "data_bytes_in", "%llu", (unsigned long long)ds.bytes_in);
    info_field(out, "data_bytes_out", "%llu", (unsigned long long)ds.bytes_out);
    info_field(out, "data_requests", "%llu", (unsigned long long)ds.requests);
    info_field(out, "data_rejected", "%llu", (unsigned long long)ds.rejected);
    info_field(out, "data_conns_accepted", "%llu", (unsigned long long)ds.conns_accepted);
    info_field(out, "data_conns_active", "%llu", (unsigned long long)ds.conns_active);
    info_field(out, "data_auth_failures", "%llu", (unsigned long long)ds.auth_failures);
    groups_info(n, out);
}

static void begin_leave(node *n);

/* MOON.DRAIN on the node: leave the cluster gracefully. */
static void drain_command(client *c) {
    begin_leave(node_of(c->srv));
    reply_ok(c);
}

static const command node_commands[] = {
    {"moon.drain", drain_command, 1, CMD_WRITE | CMD_ADMIN, 0, 0, 0, 0, "moonkv", "0.1.0",
     "Leave the cluster: the master moves our objects away, then we exit", ""},
};

/* ---- configuration ---- */

/* --data-addrs, or the bind address with port + 1. */
static int data_listeners(const mkv_config *cfg, node_data_config *dc, char *err, size_t errlen) {
    if (cfg->ndata_addrs > TE_MAX_PATHS) {
        snprintf(err, errlen, "at most %d data addresses", TE_MAX_PATHS);
        return -1;
    }
    for (int i = 0; i < cfg->ndata_addrs; i++) {
        size_t len = strlen(cfg->data_addrs[i]);
        if (len >= TE_ADDR_LEN) {
            snprintf(err, errlen, "data address '%.80s...' is longer than %d bytes",
                     cfg->data_addrs[i], TE_ADDR_LEN - 1);
            return -1;
        }
        memcpy(dc->tcp[i], cfg->data_addrs[i], len + 1);
    }
    dc->ntcp = cfg->ndata_addrs;
    if (dc->ntcp == 0) {
        if (cfg->port <= 0 || cfg->port >= 65535) {
            snprintf(err, errlen, "with --port %d give --data-addrs explicitly", cfg->port);
            return -1;
        }
        snprintf(dc->tcp[0], TE_ADDR_LEN, "%.50s:%d", cfg->bind, cfg->port + 1);
        dc->ntcp = 1;
    }
    return 0;
}

/* Which data servers the transport setting asks for. */
static int data_transports(const mkv_config *cfg, node_data_config *dc, char *err, size_t errlen) {
    dc->nservers = te_data_servers_for(cfg->transport, dc->servers, NODE_MAX_DATA_SERVERS, err, errlen);
    return dc->nservers < 0 ? -1 : 0;
}

/* ---- life cycle ---- */

static void gone_cb(event_loop *el, void *data) {
    node *n = data;
    log_notice("node: left the cluster");
    server_stop(n->srv);
}

static void leave_timeout_cb(event_loop *el, void *data) {
    node *n = data;
    log_warning("node: the master did not finish draining us within %d ms; exiting", NODE_LEAVE_MAX_MS);
    server_stop(n->srv);
}

/* Gone once every group's control thread is. */
static int all_gone(node *n) {
    pthread_mutex_lock(&n->mu);
    int gone = n->ngone == n->ngroups;
    pthread_mutex_unlock(&n->mu);
    return gone;
}

/* Ask the master to drain us; the loop ends when it is done (gone_cb)
 * or when the bounded wait runs out. */
static void begin_leave(node *n) {
    if (loop_timer_active(n->leave_timer)) return;
    log_notice("node: asking the master to drain us (SIGTERM again to exit now)");
    pthread_mutex_lock(&n->mu);
    n->leaving = 1;   /* a group the map names from now on leaves as it joins */
    int ngroups = n->ngroups;
    pthread_mutex_unlock(&n->mu);
    for (int g = 0; g < ngroups; g++) node_control_request_leave(n->groups[g].ctl);
    loop_timer_start(n->leave_timer, NODE_LEAVE_MAX_MS, 0);
}

/* After the first SIGTERM: keep serving until the master lets us go. */
static void leave(node *n) {
    if (all_gone(n)) return;
    if (loop_timer_active(n->leave_timer)) {
        /* MOON.DRAIN had begun it: this SIGTERM is the impatient second one. */
        return;
    }
    begin_leave(n);
    server_run(n->srv);
}

static int node_start(node *n, char *err, size_t errlen) {
    server *srv = n->srv;
    node_data_config dc;
    memset(&dc, 0, sizeof dc);
    heap_huge_setup_shared();   /* before the data and control threads */
    if (!srv->cfg.master[0] && !srv->cfg.etcd[0]) {
        snprintf(err, errlen, "a node needs --master host:port (or --etcd)");
        return -1;
    }
    if (data_listeners(&srv->cfg, &dc, err, errlen) != 0 || data_transports(&srv->cfg, &dc, err, errlen) != 0)
        return -1;
    int use_memfd = !node_persist_wanted(&srv->cfg);
    if (!use_memfd && !(n->persist = node_persist_open(&srv->cfg, &n->seg, &use_memfd, err, errlen)) && !use_memfd)
        return -1;
    if (use_memfd && node_segment_create(&n->seg, srv->cfg.segment_size, srv->cfg.prefault, err, errlen) != 0)
        return -1;
    dc.seg = &n->seg;
    n->index = node_index_create(n->seg.base, n->seg.size);
    /* Before anything serves: what the file held, proved. */
    if (n->persist) node_persist_load(n->persist, n->index);
    int fatal = 0;
    if (node_disk_wanted(&srv->cfg) && !(n->disk = node_disk_open(&srv->cfg, &fatal, err, errlen)) && fatal)
        return -1;
    snprintf(dc.secret, sizeof dc.secret, "%s", srv->cfg.cluster_secret);
    node_disk_reader(n->disk, &n->disk_reader);
    dc.disk = &n->disk_reader;
    n->data = node_data_start(&dc, err, errlen);
    if (!n->data) return -1;
    t_server_register(srv);
    commands_register(srv, node_commands, sizeof node_commands / sizeof node_commands[0]);
    if (server_listen(srv, err, errlen) != 0) return -1;
    n->gone = loop_wake_create(srv->loop, gone_cb, n);
    if (node_shares_setup(n, err, errlen) != 0) return -1;
    n->copier = node_copier_start(n);
    for (int g = 0; g < n->ngroups; g++) {
        if (!node_control_start(n, g)) {
            snprintf(err, errlen, "bad master address '%.64s' or etcd list '%.64s'", srv->cfg.master,
                     srv->cfg.etcd);
            return -1;
        }
    }
    node_shares_follow_start(n);
    return 0;
}

static void node_shutdown(node *n) {
    node_shares_follow_stop(n);   /* no group added from here on */
    /* Control hands tasks to the copier, the copier reports back to
     * control: end control's thread, then the copier, then free control. */
    for (int g = 0; g < n->ngroups; g++) node_control_stop(n->groups[g].ctl);
    node_copier_stop(n->copier);
    for (int g = 0; g < n->ngroups; g++) {
        node_control_free(n->groups[g].ctl);
        n->groups[g].ctl = NULL;
    }
    n->ctl = NULL;
    n->copier = NULL;
    loop_wake_free(n->gone);
    loop_timer_free(n->leave_timer);
    n->gone = NULL;
    n->leave_timer = NULL;
    node_data_stop(n->data);
    n->data = NULL;
    node_index_free(n->index);
    n->index = NULL;
    node_persist_close(n->persist, n->status.left);
    n->persist = NULL;
    disk_store_close(n->disk, n->status.left);
    n->disk = NULL;
    node_shares_free(n);
    node_segment_destroy(&n->seg);
}

int node_role_main(server *srv) {
    node *n = xcalloc(1, sizeof *n);
    n->srv = srv;
    n->seg.fd = -1;
    n->leave_timer = loop_timer_create(srv->loop, leave_timeout_cb, n);
    pthread_mutex_init(&n->mu, NULL);
    pthread_mutex_init(&n->shares_mu, NULL);
    srv->role = n;
    srv->role_info = node_info;
    METRICS_ADD_TABLE(srv, node_metrics);
    char err[256];
    int rc = 0;
    if (node_start(n, err, sizeof err) != 0) {
        log_warning("node: %s", err);
        rc = 1;
    } else {
        if (!srv->cfg.cluster_secret[0])
            log_warning("node: cluster_secret is empty: any peer can use the data plane");
        server_run(srv);   /* until SIGTERM or MOON.DRAIN finished */
        leave(n);
    }
    node_shutdown(n);
    srv->role = NULL;
    srv->role_info = NULL;
    pthread_mutex_destroy(&n->mu);
    pthread_mutex_destroy(&n->shares_mu);
    free(n);
    return rc;
}
