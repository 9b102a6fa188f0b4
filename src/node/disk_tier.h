/* node/disk_tier.h - the node's disk tier, as its flags ask (docs/SSD_TIER.md).
 *
 * --disk-dir DIR --disk-size SIZE [--disk-io auto|uring|plain]: the
 * store (disk_store.h) in DIR/moonkv-<cluster_name>-<port>.disk, its
 * records owned by the cluster's name and secret (another cluster's file
 * is refused). Without --disk-dir nothing of this runs. */
#ifndef MKV_NODE_DISK_TIER_H
#define MKV_NODE_DISK_TIER_H

#include <stddef.h>

#include "backend/data_server.h"
#include "node/disk_store.h"
#include "proto/report.h"
#include "resp/resp_writer.h"
#include "server/config.h"

/* 1 if cfg asks for a tier. */
int node_disk_wanted(const mkv_config *cfg);
/* The store, or NULL: with *fatal set and why in err when the node must
 * not start (a bad flag, a file another cluster or size owns, one in
 * use); *fatal 0 when the disk has no room for the file (logged: the
 * node runs without the tier, as if it had no --disk-dir). */
disk_store *node_disk_open(const mkv_config *cfg, int *fatal, char *err, size_t errlen);
/* The tier's records as reports of disk replicas (MOON.REPORT: seg_off
 * PROTO_REPORT_ON_DISK, the object whole, or a share's pieces one report
 * each where they lie in the object, want 1, no slice CRCs), about
 * max at a time from *cursor (0 to start; 0 again once all were
 * handed: disk_store_scan). Every one was proved when written or by the
 * scan at start (its value's CRC32C), which drops what fails. *recs and
 * *keys (where their keys point) are the caller's to free; returns how
 * many. */
size_t node_disk_reports(disk_store *ds, uint64_t *cursor, size_t max, proto_report_rec **recs, char **keys);
/* Removes every record: a master that knows none of them (we were
 * declared dead, or are new to it) would never read or free them. */
size_t node_disk_forget(disk_store *ds);
/* The data servers' reader of the tier (TE_READ_DISK: a record by its
 * key tag, streamed through the store's staging slots, proved whole
 * before its last piece goes), for node_data_config. */
void node_disk_reader(disk_store *ds, te_disk_reader *out);
/* INFO's "disk_*" fields (disk_tier:off without a store). */
void node_disk_info(disk_store *ds, resp_buf *out);

#endif
