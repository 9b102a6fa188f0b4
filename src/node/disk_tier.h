/* node/disk_tier.h - the node's disk tier, as its flags ask (docs/SSD_TIER.md).
 *
 * --disk-dir DIR --disk-size SIZE [--disk-io auto|uring|plain]: the
 * store (disk_store.h) in DIR/moonkv-<cluster_name>-<port>.disk, its
 * records owned by the cluster's name and secret (another cluster's file
 * is refused). Without --disk-dir nothing of this runs.
 *
 * On a node shared by master groups (--shared-groups) every record is
 * kept under "<group>\0<key>" (node_disk_key): each group's records are
 * its own (two groups may hold one key, a slot assigned with its old
 * objects left behind), and a restarted node reports each record to the
 * group it came from. Such a file's owner tag says "shared", so a node
 * of one master never reads prefixed keys as its own (nor the reverse).
 * A direct read (TE_READ_DISK) names a record by the tag of the client's
 * key (the store tags what follows the prefix): two groups' records of
 * one key are served by neither that way (their gets load instead). */
#ifndef MKV_NODE_DISK_TIER_H
#define MKV_NODE_DISK_TIER_H

#include <stddef.h>

#include "backend/data_server.h"
#include "node/disk_store.h"
#include "proto/limits.h"
#include "proto/report.h"
#include "resp/resp_writer.h"
#include "server/config.h"

/* The key group's key (group "": a node of one master) is kept under in
 * the store, into out (NODE_DISK_KEY_MAX bytes); its length. */
#define NODE_DISK_KEY_MAX (PROTO_MAX_KEY_LEN + 32)
_Static_assert(NODE_DISK_KEY_MAX <= DISK_MAX_KEY, "the store must take a prefixed key");
size_t node_disk_key(const char *group, const void *key, size_t keylen, char *out);

/* 1 if cfg asks for a tier. */
int node_disk_wanted(const mkv_config *cfg);
/* The store, or NULL: with *fatal set and why in err when the node must
 * not start (a bad flag, a file another cluster or size owns, one in
 * use); *fatal 0 when the disk has no room for the file (logged: the
 * node runs without the tier, as if it had no --disk-dir). */
disk_store *node_disk_open(const mkv_config *cfg, int *fatal, char *err, size_t errlen);
/* Group group's records (group "": every record; the keys without
 * their prefix) as reports of disk replicas (MOON.REPORT: seg_off
 * PROTO_REPORT_ON_DISK, the object whole, or a share's pieces one report
 * each where they lie in the object, want 1, no slice CRCs), about
 * max at a time from *cursor (0 to start; 0 again once all were
 * handed: disk_store_scan). Every one was proved when written or by the
 * scan at start (its value's CRC32C), which drops what fails. *recs and
 * *keys (where their keys point) are the caller's to free; returns how
 * many. */
size_t node_disk_reports(disk_store *ds, const char *group, uint64_t *cursor, size_t max, proto_report_rec **recs,
                         char **keys);
/* Removes group's records (every one for ""): a master that knows none
 * of them (we were declared dead, or are new to it) would never read or
 * free them. */
size_t node_disk_forget(disk_store *ds, const char *group);
/* The data servers' reader of the tier (TE_READ_DISK: a record by its
 * key tag, streamed through the store's staging slots, proved whole
 * before its last piece goes), for node_data_config. */
void node_disk_reader(disk_store *ds, te_disk_reader *out);
/* Group group's keys of records a read found rotten (disk_store_take_rotten;
 * group "": every one), without their prefix. */
size_t node_disk_take_rotten(disk_store *ds, const char *group, disk_key *out, size_t max);
/* INFO's "disk_*" fields (disk_tier:off without a store). */
void node_disk_info(disk_store *ds, resp_buf *out);

#endif
