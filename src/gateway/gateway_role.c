/* gateway/gateway_role.c - running the gateway: the standard command
 * tables over the cluster store, a "# Gateway" INFO section and the
 * other gateways as CLUSTER peers (announce.c). */
#include "core/heap_huge.h"
#include "core/log.h"
#include "gateway/announce.h"
#include "gateway/gateway.h"
#include "server/commands.h"
#include "server/info.h"
#include "server/io_threads.h"

static void gateway_info(server *srv, resp_buf *out, const char *section) {
    if (!info_wants(section, "gateway", 1)) return;
    info_section(out, "Gateway");
    cluster_store_info(srv->store, out);
}

/* The "# Gateway" fields (cluster_store_info), as metrics. */
static const metrics_field gateway_metrics[] = {
    {"jobs_inflight", "moonkv_gateway_jobs_inflight", METRIC_GAUGE, NULL,
     "Jobs queued or running on the gateway's workers (queue depth)."},
    {"jobs_done", "moonkv_gateway_jobs_done_total", METRIC_COUNTER, NULL, "Worker jobs finished."},
    {"staging_pool_bytes", "moonkv_gateway_staging_size_bytes", METRIC_GAUGE, NULL, "Staging pool size."},
    {"staging_used_bytes", "moonkv_gateway_staging_used_bytes", METRIC_GAUGE, NULL, "Staging pool bytes in use."},
    {"staging_hot_bytes", "moonkv_gateway_staging_hot_bytes", METRIC_GAUGE, NULL,
     "Staging pool bytes used since the pool was last given back while idle."},
    {"staging_dedicated", "moonkv_gateway_staging_dedicated", METRIC_GAUGE, NULL,
     "Dedicated staging mappings alive (values larger than the pool)."},
    {"staging_dedicated_bytes", "moonkv_gateway_staging_dedicated_bytes", METRIC_GAUGE, NULL,
     "Bytes in dedicated staging mappings."},
    {"staging_refused", "moonkv_gateway_staging_refused_total", METRIC_COUNTER, NULL,
     "Values refused for want of staging memory."},
    {"cluster_puts", "moonkv_gateway_cluster_ops_total", METRIC_COUNTER, "op=\"put\"",
     "Cluster operations, by kind."},
    {"cluster_gets", "moonkv_gateway_cluster_ops_total", METRIC_COUNTER, "op=\"get\"",
     "Cluster operations, by kind."},
    {"cluster_removes", "moonkv_gateway_cluster_ops_total", METRIC_COUNTER, "op=\"remove\"",
     "Cluster operations, by kind."},
    {"cluster_failed_puts", "moonkv_gateway_cluster_failures_total", METRIC_COUNTER, "op=\"put\"",
     "Cluster operations that failed, by kind."},
    {"cluster_failed_gets", "moonkv_gateway_cluster_failures_total", METRIC_COUNTER, "op=\"get\"",
     "Cluster operations that failed, by kind."},
    {"cluster_bytes_put", "moonkv_gateway_cluster_bytes_total", METRIC_COUNTER, "direction=\"put\"",
     "Value bytes moved to and from the nodes."},
    {"cluster_bytes_got", "moonkv_gateway_cluster_bytes_total", METRIC_COUNTER, "direction=\"get\"",
     "Value bytes moved to and from the nodes."},
    {"transfer_bytes_tcp", "moonkv_transfer_bytes_total", METRIC_COUNTER, "transport=\"tcp\"",
     "Transfer-engine value bytes, by transport."},
    {"transfer_bytes_shm", "moonkv_transfer_bytes_total", METRIC_COUNTER, "transport=\"shm\"",
     "Transfer-engine value bytes, by transport."},
    {"transfer_bytes_rdma", "moonkv_transfer_bytes_total", METRIC_COUNTER, "transport=\"rdma\"",
     "Transfer-engine value bytes, by transport."},
    {"transfer_retries", "moonkv_transfer_retries_total", METRIC_COUNTER, NULL,
     "Slices retried on another path."},
    {"transfer_failovers", "moonkv_transfer_failovers_total", METRIC_COUNTER, NULL,
     "Reads failed over to another replica."},
    {"loop_blocking_calls", "moonkv_gateway_loop_blocking_calls_total", METRIC_COUNTER, NULL,
     "Store calls that waited for the master on the gateway's event loop (0 in normal operation)."},
};

static size_t gateway_peers(server *srv, resp_endpoint *out, size_t max) {
    return gw_announce_peers(srv->role, out, max);
}

/* A server's gateway state: the cluster store and the commands over it.
 * Every I/O thread's server gets its own. */
static int gateway_setup(server *srv, char *err, size_t errlen) {
    /* The loops share segment_size: each staging pool gets its part. */
    uint64_t seg = srv->cfg.segment_size;
    srv->cfg.segment_size = seg / (uint64_t)srv->cfg.io_threads;
    srv->store = cluster_store_create(srv->loop, &srv->cfg, err, errlen);
    srv->cfg.segment_size = seg;
    if (!srv->store) return -1;
    t_server_register(srv);
    t_object_register(srv);
    t_cluster_register(srv);
    t_multi_register(srv);
    gateway_async_register(srv);
    srv->role_info = gateway_info;
    METRICS_ADD_TABLE(srv, gateway_metrics);
    return 0;
}

/* Once the server is reachable: announce it to the master (each loop
 * keeps its own copy of the other gateways for CLUSTER). */
static void gateway_announce(server *srv) {
    srv->role = gw_announce_start(srv);
    srv->role_peers = gateway_peers;
}

static int gateway_thread_setup(server *srv, char *err, size_t errlen) {
    if (gateway_setup(srv, err, errlen) < 0) return -1;
    gateway_announce(srv);
    return 0;
}

/* What gateway_setup and gateway_announce started beyond the store
 * (server_cleanup frees that). */
static void gateway_teardown(server *srv) {
    srv->role_peers = NULL;
    gw_announce_stop(srv->role);
    srv->role = NULL;
    srv->role_info = NULL;
}

static const io_role gateway_io_role = {gateway_thread_setup, gateway_teardown};

int gateway_role_main(server *srv) {
    char err[512];
    heap_steady_setup();   /* before the batches: no heap trim and regrow per loop iteration */
    if (gateway_setup(srv, err, sizeof err) < 0 || server_listen(srv, err, sizeof err) < 0) {
        log_warning("gateway: %s", err);
        gateway_teardown(srv);
        return 1;   /* server_cleanup destroys the store */
    }
    io_threads *io = NULL;
    if (srv->cfg.io_threads > 1 && !(io = io_threads_start(srv, &gateway_io_role, err, sizeof err))) {
        log_warning("gateway: %s", err);
        gateway_teardown(srv);
        return 1;
    }
    gateway_announce(srv);
    log_notice("gateway ready: master %s, replicas %d, io threads %d", srv->cfg.master, srv->cfg.replicas,
               srv->cfg.io_threads);
    server_run(srv);
    io_threads_stop(io);
    gateway_teardown(srv);
    return 0;
}
