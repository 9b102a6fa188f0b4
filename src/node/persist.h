/* node/persist.h - a node's segment and index that outlive its process.
 *
 * The segment is a file in /dev/shm (or on a hugetlbfs mount), named
 * after the cluster and the node's RESP port
 * (/dev/shm/moonkv-<cluster>-<port>.seg) unless --segment-file names it;
 * the segment is its first segment_size bytes (what the shm transport
 * maps into clients), a header page follows them: magic, version, the
 * segment size, a hash of the cluster name and of the cluster secret,
 * the node id, a generation. Beside it, <file>.idx is the index's log
 * (journal.h) of the same generation. A file of another cluster, secret,
 * size or node id is refused (the node does not start); a log that is
 * missing or damaged is dropped whole and the node starts empty. The
 * file is locked while a process uses it. --segment-persist no: a memfd
 * as before (segment.h). */
#ifndef MKV_NODE_PERSIST_H
#define MKV_NODE_PERSIST_H

#include <stdint.h>

#include "node/index.h"
#include "node/segment.h"
#include "resp/resp_writer.h"
#include "server/config.h"

typedef struct node_persist node_persist;

/* The cluster name as a part of a file name: anything else than
 * [A-Za-z0-9._-] becomes '_' (the segment's and the disk tier's files). */
void node_file_cluster_part(const mkv_config *cfg, char *out, size_t len);

/* Whether cfg asks for a persistent segment (segment_persist, and a file
 * name: --segment-file or a fixed port). */
int node_persist_wanted(const mkv_config *cfg);

/* Opens or creates the file and maps the segment from it into seg; NULL
 * with a message naming the file (and how to remove it) if it is refused,
 * or NULL with *use_memfd set when a new file would not fit its file
 * system (logged: the node runs on a memfd as before). */
node_persist *node_persist_open(const mkv_config *cfg, node_segment *seg, int *use_memfd, char *err,
                                size_t errlen);

/* The index back from the log (nothing for a new file), every object
 * lying wholly here proved by its CRC32C on several threads (failures
 * dropped); then the log records every change of ix. */
void node_persist_load(node_persist *p, node_index *ix);

/* 1 if the index came back from the file (a restarted node: the master
 * should keep what it proves). */
int node_persist_restored(const node_persist *p);
/* The id the file's node had (0: never registered). */
uint32_t node_persist_node_id(const node_persist *p);
void node_persist_set_node_id(node_persist *p, uint32_t id);

/* A small file beside the segment's (<file><suffix>; in /dev/shm beside
 * the log for a hugetlbfs file) holding text of the caller's, tied to
 * this generation of the segment: written whole (a temporary renamed
 * into place), read back only while the segment is the one it was
 * written for, removed with the segment's files. One suffix per node.
 * 0, or -1 (logged). */
int node_persist_side_write(node_persist *p, const char *suffix, const char *text, size_t len);
/* Its text (NUL-terminated, the caller frees it) into *out, or -1: no
 * file, another generation's, or more than max bytes. */
int node_persist_side_read(node_persist *p, const char *suffix, char **out, size_t max);

void node_persist_info(const node_persist *p, resp_buf *out);

/* After the index is freed (the log goes with p); remove: the node left
 * the cluster, its bytes are nobody's (the files are deleted). The
 * segment itself is unmapped and closed by node_segment_destroy. */
void node_persist_close(node_persist *p, int remove);

#endif
