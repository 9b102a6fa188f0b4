/* standalone/standalone_role.c - running the standalone role: the local
 * segment store behind the standard command tables. */
#include "standalone/standalone.h"

#include "core/heap_huge.h"
#include "core/log.h"
#include "server/commands.h"
#include "standalone/store_local.h"

/* The local store's "# Memory" and "# Segment" fields, as metrics. */
static const metrics_field standalone_metrics[] = {
    {"segment_size", "moonkv_segment_size_bytes", METRIC_GAUGE, NULL, "Memory segment size."},
    {"segment_used", "moonkv_segment_used_bytes", METRIC_GAUGE, NULL, "Segment bytes in use."},
    {"used_memory_peak", "moonkv_segment_used_peak_bytes", METRIC_GAUGE, NULL, "Most segment bytes ever in use."},
    {"segment_warmed_bytes", "moonkv_segment_warmed_bytes", METRIC_GAUGE, NULL,
     "Segment bytes warmed by the background warmer (segment_size when done)."},
    {"segment_free", "moonkv_segment_free_bytes", METRIC_GAUGE, NULL, "Segment bytes free."},
    {"largest_free_extent", "moonkv_segment_largest_free_extent_bytes", METRIC_GAUGE, NULL,
     "Largest value that fits now."},
    {"free_extents", "moonkv_segment_free_extents", METRIC_GAUGE, NULL, "Free extents (holes)."},
    {"fragmentation_ratio", "moonkv_segment_fragmentation_ratio", METRIC_GAUGE, NULL,
     "1 - largest free extent / free bytes (0: one hole)."},
    {"objects_complete", "moonkv_objects", METRIC_GAUGE, "state=\"complete\"", "Objects, by state."},
    {"objects_pending", "moonkv_objects", METRIC_GAUGE, "state=\"pending\"", "Objects, by state."},
    {"objects_unlinked_pinned", "moonkv_objects", METRIC_GAUGE, "state=\"unlinked_pinned\"",
     "Objects, by state."},
    {"evicted_keys", "moonkv_evicted_keys_total", METRIC_COUNTER, NULL,
     "Objects collected by the maxmemory policy."},
    {"evicted_expired_keys", "moonkv_evicted_expired_keys_total", METRIC_COUNTER, NULL,
     "Of those, objects collected because their EX/PX hint passed."},
    {"checksum_errors", "moonkv_checksum_errors_total", METRIC_COUNTER, NULL,
     "Reads that found a value's checksum wrong."},
};

int standalone_role_main(server *srv) {
    char err[256];
    /* The heap grows in large steps and is not trimmed, but is not advised
     * onto transparent huge pages (no heap_huge_advise): on this VM a
     * fresh server's first 400k pipelined 64 B SETs spent a quarter of
     * the loop's time in the kernel zeroing 2 MiB heap pages
     * (clear_page_erms), far more than the 4 KiB faults they replace. */
    heap_huge_setup();
    srv->store = store_local_create(srv->cfg.segment_size, srv->cfg.prefault, err, sizeof err);
    if (!srv->store) {
        log_warning("Cannot create the memory segment: %s", err);
        return 1;
    }
    store_local_gc(srv->store, srv->cfg.maxmemory_policy, (unsigned)srv->cfg.gc_high_watermark,
                   (unsigned)srv->cfg.gc_low_watermark);
    METRICS_ADD_TABLE(srv, standalone_metrics);
    t_server_register(srv);
    t_object_register(srv);
    t_cluster_register(srv);
    t_multi_register(srv);
    if (server_listen(srv, err, sizeof err) < 0) {
        log_warning("%s", err);
        return 1;
    }
    server_run(srv);
    return 0;
}
