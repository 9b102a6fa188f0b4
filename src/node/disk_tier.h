/* node/disk_tier.h - the node's disk tier, as its flags ask (docs/SSD_TIER.md).
 *
 * --disk-dir DIR --disk-size SIZE [--disk-io auto|uring|plain]: the
 * store (disk_store.h) in DIR/moonkv-<cluster_name>-<port>.disk, its
 * records owned by the cluster's name and secret (another cluster's file
 * is refused). Without --disk-dir nothing of this runs. */
#ifndef MKV_NODE_DISK_TIER_H
#define MKV_NODE_DISK_TIER_H

#include <stddef.h>

#include "node/disk_store.h"
#include "resp/resp_writer.h"
#include "server/config.h"

/* 1 if cfg asks for a tier. */
int node_disk_wanted(const mkv_config *cfg);
/* The store, or NULL: with *fatal set and why in err when the node must
 * not start (a bad flag, a file another cluster or size owns, one in
 * use); *fatal 0 when the disk has no room for the file (logged: the
 * node runs without the tier, as if it had no --disk-dir). */
disk_store *node_disk_open(const mkv_config *cfg, int *fatal, char *err, size_t errlen);
/* INFO's "disk_*" fields (disk_tier:off without a store). */
void node_disk_info(disk_store *ds, resp_buf *out);

#endif
