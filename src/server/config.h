/* server/config.h - settings of every role, from JSON and the command line.
 *
 * One table (config.c) names each key, its type, bounds and default, so
 * adding a setting is adding a row; flags and file keys share it
 * ("segment_size" in JSON is --segment-size on the command line).
 * Command-line values win over the file. */
#ifndef MKV_CONFIG_H
#define MKV_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define CONFIG_STR_MAX 256
#define CONFIG_MAX_ADDRS 16

typedef enum { ROLE_STANDALONE = 0, ROLE_MASTER, ROLE_NODE, ROLE_GATEWAY } mkv_role;
/* on_conflict: a SET of a stored key with other bytes. */
enum { CONFLICT_ERROR = 0, CONFLICT_KEEP = 1 };

typedef struct mkv_config {
    mkv_role role;
    char bind[CONFIG_STR_MAX];          /* default 127.0.0.1 */
    int port;                           /* default 7379 */
    int metrics_port;                   /* Prometheus HTTP port, 0 = off (default) */
    char requirepass[CONFIG_STR_MAX];   /* empty = no AUTH needed */
    uint64_t segment_size;              /* default 512MB */
    int log_level;                      /* log_level from core/log.h */
    int maxclients;                     /* default 10000 */
    long long proto_max_bulk_len;       /* default 512MB */
    /* Before AUTH (requirepass set): the largest command a client may send. */
    int preauth_max_multibulk;          /* arguments, default 10 */
    long long preauth_max_bulk_len;     /* bytes per argument, default 16KB */
    uint64_t client_output_limit;       /* bytes queued per client before it is dropped */
    int tcp_backlog;                    /* default 511 */
    int prefault;                       /* touch segment pages at start (default 1) */
    int segment_persist;                /* node: segment and index in a file (default 1, node/persist.h) */
    char segment_file[CONFIG_STR_MAX];  /* node: that file; empty: named after cluster and port */
    int scrub_mb_per_s;                 /* node: background re-check of held objects (0: off) */
    char disk_dir[CONFIG_STR_MAX];      /* node: the disk tier's directory; empty: no tier (docs/SSD_TIER.md) */
    uint64_t disk_size;                 /* node: bytes of the tier's file there */
    char disk_io[16];                   /* node: auto|uring|plain */
    /* Cluster roles. */
    char master[CONFIG_STR_MAX];        /* "host:port" of the master */
    char master_auth[CONFIG_STR_MAX];   /* the master's requirepass; empty = no AUTH */
    int replicas;                       /* gateway default replica count */
    int io_threads;                     /* gateway: event loops serving clients, default 1 */
    char data_addrs[CONFIG_MAX_ADDRS][CONFIG_STR_MAX];
    int ndata_addrs;
    char transport[16];                 /* auto|tcp|shm|rdma */
    char shm_mode[16];                  /* map|fd: how this process's client reaches same-host nodes */
    char cluster_secret[CONFIG_STR_MAX];
    int node_id;                        /* node: the id to claim from the master, 0 = any */
    int heartbeat_ms, node_timeout_ms, put_timeout_ms, lease_ms;
    int put_wait_ms;                    /* master: bound on a put's wait for quarantined space */
    int rejoin_grace_ms;                /* master: new nodes wait for old ones to claim ids */
    /* A value streaming into a store: after put_timeout_ms without bytes,
     * or older than that and slower than put_min_rate, it is dropped; idle
     * put_stall_ms, its space goes to a put that needs it. */
    uint64_t put_min_rate;              /* bytes/s, 0 = no minimum */
    int put_stall_ms;
    uint64_t stripe_threshold;          /* objects above this are striped */
    uint64_t stripe_unit;               /* bytes of a striped object's extents; default 1MB */
    int stripe_width;                   /* nodes per replica for striped objects */
    /* Redis behaviours KV-cache clients rely on (README "on_conflict and GC"). */
    int on_conflict;                    /* CONFLICT_ERROR (default) or CONFLICT_KEEP */
    int maxmemory_policy;               /* evict_policy of core/evict.h, default noeviction */
    int gc_high_watermark;              /* percent of memory used that starts collection */
    int gc_low_watermark;               /* percent collection brings use down to */
    int disk_high_watermark;            /* master: percent of a node's DRAM that starts offloads (0: off) */
    int disk_low_watermark;             /* percent offloads bring it down to */
    int disk_promote_after;             /* master: reads of an object on disk that promote it */
    int max_nodes;                      /* master: node ids it takes (proto/limits.h) */
    int get_wait_ms;                    /* master: bound on a get's wait for a load from disk */
    char sentinel_master_name[64];      /* the name SENTINEL answers for */
    char config_file[CONFIG_STR_MAX];
    /* Failover through etcd (empty etcd: one master, --master as today). */
    char etcd[CONFIG_STR_MAX];          /* "http://host:port[,...]" */
    char cluster_name[64];              /* the key prefix /moonkv/<name>/, default "moonkv" */
    int etcd_lease_ttl;                 /* seconds, default 2 */
    /* Master groups (docs/SCALE.md "Master groups"): with a group, the
     * group's etcd keys are under /moonkv/<cluster>/g/<group>/, so
     * cluster_name becomes "<cluster>/g/<group>" once the flags are read
     * and slot_cluster keeps "<cluster>", whose slot map it follows. */
    char group[32];                     /* "": the cluster is one group */
    int groups;                         /* gateway: route each key to its group by the slot map */
    char slots[CONFIG_STR_MAX];         /* master: slots to claim while they have no group ("a-b,...", "all") */
    char shared_groups[CONFIG_STR_MAX]; /* node: the master groups it serves ("a,b", "map": the slot map's) */
    char slot_cluster[64];
} mkv_config;

void config_defaults(mkv_config *cfg);
/* Load a JSON file over cfg. -1 with one message naming the key and the
 * problem ("config error in conf/x.json: 'port' must be ...") in err. */
int config_load_file(mkv_config *cfg, const char *path, char *err, size_t errlen);
/* The same from JSON text in memory (NUL-terminated); name is only used
 * in messages. */
int config_load_text(mkv_config *cfg, const char *text, const char *name, char *err, size_t errlen);
/* Apply --key value flags (argv after the program name). Handles --config
 * itself (file first, flags after). Returns 0, 1 when --help/--version
 * printed and the program should exit 0, -1 on error (message in err). */
int config_from_args(mkv_config *cfg, int argc, char **argv, char *err, size_t errlen);
const char *config_role_name(mkv_role r);
/* CONFIG GET support: value of a key by its Redis-style name
 * ("maxclients", "port", "segment-size"); NULL if unknown. buf for text. */
const char *config_get_value(const mkv_config *cfg, const char *name, char *buf, size_t buflen);
/* Iterate all key names (for CONFIG GET * and patterns); NULL at the end. */
const char *config_key_name(int i);

#endif
