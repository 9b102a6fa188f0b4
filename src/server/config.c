/* server/config.c - the settings table, JSON files and command-line flags.
 *
 * Every setting is one row of config_table: its JSON name, its type, its
 * bounds and where it lives in mkv_config. The flag name is the JSON name
 * with '-' for '_'. Files and flags go through the same setter, so a value
 * is checked the same way wherever it comes from, and every problem ends
 * in one message naming the key. */
#include "server/config.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "proto/limits.h"
#include "core/util.h"

#ifndef MOONKV_VERSION
#define MOONKV_VERSION "unknown"
#endif

#define CONFIG_FILE_MAX (1024 * 1024)   /* a config file is small; refuse more */

typedef enum {
    CT_INT,      /* int within [min, max] */
    CT_SIZE,     /* uint64_t: JSON number or "512MB"-style string */
    CT_LL,       /* long long bytes, same syntax as CT_SIZE */
    CT_BOOL,     /* int 0/1: JSON true/false, flag yes/no/true/false/1/0 */
    CT_STR,      /* char[CONFIG_STR_MAX] or smaller (size in max) */
    CT_ENUM,     /* int index into a NULL-terminated name list */
    CT_LOGLEVEL, /* int, parsed by log_level_parse */
    CT_ADDRS     /* data_addrs: JSON array of strings or "a,b" */
} config_type;

typedef struct config_row {
    const char *name;        /* JSON name, e.g. "segment_size" */
    config_type type;
    size_t offset;
    long long min, max;      /* CT_INT/CT_SIZE/CT_LL bounds; CT_STR buffer size */
    const char *const *names;/* CT_ENUM choices */
    const char *help;
} config_row;

static const char *const role_names[] = {"standalone", "master", "node", "gateway", NULL};
static const char *const transport_names[] = {"auto", "tcp", "shm", "rdma", NULL};
static const char *const conflict_names[] = {"error", "keep", NULL};
/* In evict_policy order (core/evict.h). */
static const char *const policy_names[] = {"noeviction", "allkeys-lru", "allkeys-random", NULL};
static const char *const shm_mode_names[] = {"map", "fd", NULL};
static const char *const disk_io_names[] = {"auto", "uring", "plain", NULL};

#define OFF(f) offsetof(mkv_config, f)
#define KB (1024LL)
#define MB (1024LL * 1024)
#define GB (1024LL * 1024 * 1024)
#define TB (1024LL * 1024 * 1024 * 1024)

static const config_row config_table[] = {
    {"role", CT_ENUM, OFF(role), 0, 0, role_names, "standalone|master|node|gateway"},
    {"bind", CT_STR, OFF(bind), 0, CONFIG_STR_MAX, NULL, "address to listen on"},
    {"port", CT_INT, OFF(port), 0, 65535, NULL, "TCP port (0 picks a free one)"},
    {"metrics_port", CT_INT, OFF(metrics_port), 0, 65535, NULL,
     "Prometheus /metrics over HTTP on the bind address (0: off)"},
    {"requirepass", CT_STR, OFF(requirepass), 0, CONFIG_STR_MAX, NULL, "password for AUTH"},
    {"segment_size", CT_SIZE, OFF(segment_size), MB, 16 * TB, NULL, "memory segment, e.g. 512MB, 4GB"},
    {"log_level", CT_LOGLEVEL, OFF(log_level), 0, 0, NULL, "debug|verbose|notice|warning|nothing"},
    {"maxclients", CT_INT, OFF(maxclients), 1, 1000000, NULL, "most connected clients"},
    {"proto_max_bulk_len", CT_LL, OFF(proto_max_bulk_len), KB, 64 * GB, NULL, "largest bulk argument"},
    {"preauth_max_multibulk", CT_INT, OFF(preauth_max_multibulk), 1, 1024 * 1024, NULL,
     "most arguments of a command before AUTH"},
    {"preauth_max_bulk_len", CT_LL, OFF(preauth_max_bulk_len), 64, 512 * MB, NULL,
     "largest argument before AUTH"},
    {"client_output_limit", CT_SIZE, OFF(client_output_limit), MB, 64 * GB, NULL,
     "queued reply bytes before a client is dropped"},
    {"tcp_backlog", CT_INT, OFF(tcp_backlog), 1, 65535, NULL, "listen() backlog"},
    {"segment_persist", CT_BOOL, OFF(segment_persist), 0, 1, NULL,
     "node: keep the segment and its index in a file that outlives the process (yes|no)"},
    {"segment_file", CT_STR, OFF(segment_file), 0, CONFIG_STR_MAX, NULL,
     "node: that file (default /dev/shm/moonkv-<cluster_name>-<port>.seg; a hugetlbfs path works)"},
    {"prefault", CT_BOOL, OFF(prefault), 0, 1, NULL, "touch segment pages at start (yes|no)"},
    {"disk_dir", CT_STR, OFF(disk_dir), 0, CONFIG_STR_MAX, NULL,
     "node: a disk tier in this directory (docs/SSD_TIER.md); empty: none"},
    {"disk_size", CT_SIZE, OFF(disk_size), MB, 1024 * TB, NULL, "node: the disk tier's file, e.g. 512MB, 2TB"},
    {"disk_io", CT_ENUM, OFF(disk_io), 0, 0, disk_io_names,
     "node: auto|uring|plain (io_uring with O_DIRECT, or pread/pwrite)"},
    {"scrub_mb_per_s", CT_INT, OFF(scrub_mb_per_s), 0, 100000, NULL,
     "node: MB/s of held objects re-checked against their CRC32C in the background (0: off)"},
    {"master", CT_STR, OFF(master), 0, CONFIG_STR_MAX, NULL, "host:port of the master"},
    {"master_auth", CT_STR, OFF(master_auth), 0, CONFIG_STR_MAX, NULL,
     "password nodes and gateways AUTH to the master with"},
    {"replicas", CT_INT, OFF(replicas), 1, 16, NULL, "replica count of new objects"},
    {"io_threads", CT_INT, OFF(io_threads), 1, 64, NULL,
     "gateway: event loops serving clients, connections spread round-robin"},
    {"data_addrs", CT_ADDRS, OFF(data_addrs), 0, 0, NULL, "data-plane addresses A,B"},
    {"transport", CT_ENUM, OFF(transport), 0, 0, transport_names, "auto|tcp|shm|rdma"},
    {"shm_mode", CT_ENUM, OFF(shm_mode), 0, 0, shm_mode_names,
     "map|fd: same-host segments mapped (trusted clients) or read with pread/pwrite"},
    {"cluster_secret", CT_STR, OFF(cluster_secret), 0, CONFIG_STR_MAX, NULL, "shared cluster secret"},
    {"node_id", CT_INT, OFF(node_id), 0, 65536, NULL,
     "node: claim this id from the master (a restarted node keeps its id); 0 = any"},
    {"heartbeat_ms", CT_INT, OFF(heartbeat_ms), 10, 600000, NULL, "node heartbeat period"},
    {"node_timeout_ms", CT_INT, OFF(node_timeout_ms), 100, 3600000, NULL, "node declared dead after"},
    {"put_timeout_ms", CT_INT, OFF(put_timeout_ms), 100, 3600000, NULL, "unfinished put dropped after"},
    {"put_min_rate", CT_SIZE, OFF(put_min_rate), 0, 64 * GB, NULL,
     "bytes/s a value older than put_timeout_ms must average"},
    {"put_stall_ms", CT_INT, OFF(put_stall_ms), 10, 3600000, NULL,
     "a put idle this long yields its space to a put that needs it"},
    {"lease_ms", CT_INT, OFF(lease_ms), 100, 3600000, NULL, "read lease length"},
    {"rejoin_grace_ms", CT_INT, OFF(rejoin_grace_ms), 0, 3600000, NULL,
     "master: a node claiming no id waits this long after the master starts or is elected, "
     "so the cluster's nodes claim theirs first (0: no wait)"},
    {"put_wait_ms", CT_INT, OFF(put_wait_ms), 0, 60000, NULL,
     "a put that finds no room waits this long for quarantined space (0: NOSPACE at once)"},
    {"stripe_threshold", CT_SIZE, OFF(stripe_threshold), KB, 16 * TB, NULL, "objects above this are striped"},
    {"stripe_unit", CT_SIZE, OFF(stripe_unit), 4 * KB, GB, NULL,
     "a striped object's extents: this many bytes each, dealt over stripe_width nodes"},
    {"slice_size", CT_SIZE, OFF(stripe_unit), 4 * KB, GB, NULL, "old name of stripe_unit"},
    {"stripe_width", CT_INT, OFF(stripe_width), 1, 64, NULL, "nodes per replica when striped"},
    {"on_conflict", CT_ENUM, OFF(on_conflict), 0, 0, conflict_names,
     "SET of a stored key with other bytes: error (EXISTS) or keep (first value, +OK)"},
    {"maxmemory_policy", CT_ENUM, OFF(maxmemory_policy), 0, 0, policy_names,
     "noeviction|allkeys-lru|allkeys-random (garbage collection)"},
    {"gc_high_watermark", CT_INT, OFF(gc_high_watermark), 1, 100, NULL,
     "percent of memory in use that starts collection"},
    {"gc_low_watermark", CT_INT, OFF(gc_low_watermark), 0, 99, NULL,
     "percent of memory in use collection brings it down to"},
    {"disk_high_watermark", CT_INT, OFF(disk_high_watermark), 0, 100, NULL,
     "master: percent of a node's DRAM in use above which it offloads to the node's disk (0: never)"},
    {"disk_low_watermark", CT_INT, OFF(disk_low_watermark), 0, 99, NULL,
     "master: percent of a node's DRAM in use offloading brings it down to"},
    {"disk_promote_after", CT_INT, OFF(disk_promote_after), 1, 1000000, NULL,
     "master: an object on disk is promoted to DRAM at its Nth read; before, a read goes through a "
     "temporary DRAM copy"},
    {"max_nodes", CT_INT, OFF(max_nodes), 1, PROTO_MAX_NODES, NULL,
     "master: node ids it takes (its node table grows as they come; a pointer per id)"},
    {"get_wait_ms", CT_INT, OFF(get_wait_ms), 0, 60000, NULL,
     "master: a get of an object on disk waits this long for its load (0: TRYAGAIN at once)"},
    {"sentinel_master_name", CT_STR, OFF(sentinel_master_name), 0, 64, NULL,
     "master name SENTINEL answers for (unset: any name)"},
    {"etcd", CT_STR, OFF(etcd), 0, CONFIG_STR_MAX, NULL, "etcd endpoints http://h:p,... (failover)"},
    {"cluster_name", CT_STR, OFF(cluster_name), 1, 64, NULL, "cluster name in etcd keys"},
    {"etcd_lease_ttl", CT_INT, OFF(etcd_lease_ttl), 1, 300, NULL, "leader lease in etcd, seconds"},
    {"group", CT_STR, OFF(group), 0, 32, NULL, "master group of a key space cut over groups (needs etcd)"},
    {"shared_groups", CT_STR, OFF(shared_groups), 0, CONFIG_STR_MAX, NULL,
     "node: master groups it serves, its segment shared in chunks (a,b,... or map: the slot map's; needs etcd)"},
    {"slots", CT_STR, OFF(slots), 0, CONFIG_STR_MAX, NULL, "master: hash slots its group claims if free (a-b,... or all)"},
    {"groups", CT_BOOL, OFF(groups), 0, 1, NULL,
     "gateway: route each key to its master group by the slot map in etcd (yes|no, needs etcd)"},
};
#define CONFIG_NROWS (sizeof config_table / sizeof config_table[0])
_Static_assert(sizeof ((mkv_config *)0)->shm_mode == sizeof ((mkv_config *)0)->transport,
               "text enums are set with one size");

void config_defaults(mkv_config *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->role = ROLE_STANDALONE;
    snprintf(cfg->bind, sizeof cfg->bind, "127.0.0.1");
    cfg->port = 7379;
    cfg->segment_size = 512 * MB;
    cfg->log_level = LOG_NOTICE;
    cfg->maxclients = 10000;
    cfg->proto_max_bulk_len = 512 * MB;
    cfg->preauth_max_multibulk = 10;
    cfg->preauth_max_bulk_len = 16 * KB;
    cfg->client_output_limit = 256 * MB;
    cfg->tcp_backlog = 511;
    cfg->prefault = 1;
    cfg->segment_persist = 1;
    cfg->scrub_mb_per_s = 8;
    snprintf(cfg->disk_io, sizeof cfg->disk_io, "auto");
    cfg->replicas = 1;
    cfg->io_threads = 1;
    snprintf(cfg->transport, sizeof cfg->transport, "auto");
    snprintf(cfg->shm_mode, sizeof cfg->shm_mode, "map");
    cfg->heartbeat_ms = 1000;
    cfg->node_timeout_ms = 5000;
    cfg->put_timeout_ms = 30000;
    cfg->put_min_rate = 1 * MB;
    cfg->put_stall_ms = 200;
    cfg->lease_ms = 10000;
    cfg->put_wait_ms = 1000;
    cfg->rejoin_grace_ms = 1500;   /* 3 of a node's join attempts (PROTO_REJOIN_MS) */
    cfg->stripe_threshold = 4 * MB;
    cfg->stripe_unit = 1 * MB;
    cfg->stripe_width = 2;
    cfg->on_conflict = CONFLICT_ERROR;
    cfg->maxmemory_policy = 0;   /* noeviction */
    cfg->gc_high_watermark = 90;
    cfg->gc_low_watermark = 80;
    cfg->disk_high_watermark = 0;
    cfg->disk_low_watermark = 70;
    cfg->disk_promote_after = 1;
    cfg->max_nodes = PROTO_DEFAULT_MAX_NODES;
    cfg->get_wait_ms = 3000;
    snprintf(cfg->cluster_name, sizeof cfg->cluster_name, "moonkv");
    cfg->etcd_lease_ttl = 2;
}

const char *config_role_name(mkv_role r) {
    return (r >= ROLE_STANDALONE && r <= ROLE_GATEWAY) ? role_names[r] : "unknown";
}

/* ---- Lookup ------------------------------------------------------------ */

/* Keys match with '-' and '_' treated alike, so "segment-size",
 * "segment_size" and "SEGMENT-SIZE" all name the same row. */
static int key_matches(const char *row, const char *name, size_t len) {
    size_t i = 0;
    for (; i < len && row[i]; i++) {
        char a = row[i], b = name[i];
        if (b == '-') b = '_';
        if (b >= 'A' && b <= 'Z') b = (char)(b + 32);
        if (a != b) return 0;
    }
    return i == len && row[i] == '\0';
}

static const config_row *row_find(const char *name, size_t len) {
    for (size_t i = 0; i < CONFIG_NROWS; i++)
        if (key_matches(config_table[i].name, name, len)) return &config_table[i];
    return NULL;
}

/* ---- Setting one value --------------------------------------------------- */

/* A value as found in a file or on the command line. Flags are always
 * text; JSON brings numbers, booleans, strings and arrays. */
typedef struct config_value {
    const char *text;        /* flag value or JSON string, else NULL */
    const cJSON *json;       /* JSON item, NULL for flags */
} config_value;

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Integral value of v: JSON integral number or a decimal flag. */
static int value_integer(const config_value *v, long long *out) {
    if (v->json) {
        if (!cJSON_IsNumber(v->json)) return -1;
        double d = v->json->valuedouble;
        /* Range first: casting a double beyond long long is undefined. */
        if (!(d > -9.2e18 && d < 9.2e18) || d != (double)(long long)d) return -1;
        *out = (long long)d;
        return 0;
    }
    char *end;
    errno = 0;
    long long n = strtoll(v->text, &end, 10);
    if (errno || end == v->text || *end) return -1;
    *out = n;
    return 0;
}

/* Size in bytes: a non-negative integer or "512MB". */
static int value_size(const config_value *v, uint64_t *out) {
    if (v->json && cJSON_IsNumber(v->json)) {
        long long n;
        if (value_integer(v, &n) < 0 || n < 0) return -1;
        *out = (uint64_t)n;
        return 0;
    }
    if (!v->text) return -1;
    return parse_size(v->text, out);
}

static int value_bool(const config_value *v, int *out) {
    if (v->json) {
        if (!cJSON_IsBool(v->json)) return -1;
        *out = cJSON_IsTrue(v->json);
        return 0;
    }
    static const char *const yes[] = {"yes", "true", "1", "on"}, *const no[] = {"no", "false", "0", "off"};
    for (size_t i = 0; i < 4; i++) {
        if (strieq_len(v->text, strlen(v->text), yes[i])) return *out = 1, 0;
        if (strieq_len(v->text, strlen(v->text), no[i])) return *out = 0, 0;
    }
    return -1;
}

static void enum_choices(const char *const *names, char *buf, size_t len) {
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; names[i] && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", names[i]);
}

/* Add one address to cfg->data_addrs. */
static int addr_add(mkv_config *cfg, const char *s, size_t n, const char *key, char *err, size_t errlen) {
    if (n == 0) return fail(err, errlen, "'%s' has an empty address", key);
    if (cfg->ndata_addrs >= CONFIG_MAX_ADDRS)
        return fail(err, errlen, "'%s' has more than %d addresses", key, CONFIG_MAX_ADDRS);
    if (n >= CONFIG_STR_MAX)
        return fail(err, errlen, "'%s' has an address longer than %d bytes", key, CONFIG_STR_MAX - 1);
    memcpy(cfg->data_addrs[cfg->ndata_addrs], s, n);
    cfg->data_addrs[cfg->ndata_addrs++][n] = '\0';
    return 0;
}

static int set_addrs(mkv_config *cfg, const config_value *v, const char *key, char *err, size_t errlen) {
    cfg->ndata_addrs = 0;
    if (v->json && cJSON_IsArray(v->json)) {
        const cJSON *it;
        cJSON_ArrayForEach(it, v->json) {
            if (!cJSON_IsString(it))
                return fail(err, errlen, "'%s' must be a list of \"host:port\" strings", key);
            if (addr_add(cfg, it->valuestring, strlen(it->valuestring), key, err, errlen) < 0) return -1;
        }
        return 0;
    }
    if (!v->text) return fail(err, errlen, "'%s' must be a list of \"host:port\" strings", key);
    for (const char *p = v->text; *p;) {
        const char *comma = strchr(p, ',');
        size_t n = comma ? (size_t)(comma - p) : strlen(p);
        if (addr_add(cfg, p, n, key, err, errlen) < 0) return -1;
        p += n + (comma ? 1 : 0);
        if (comma && !*p) return fail(err, errlen, "'%s' has an empty address", key);
    }
    return 0;
}

/* Check v against row and store it; key is how the user spelled the
 * setting (JSON name or --flag), so the message points at their text. */
static int config_set(mkv_config *cfg, const config_row *r, const config_value *v,
                      const char *key, char *err, size_t errlen) {
    char *field = (char *)cfg + r->offset;
    long long n;
    uint64_t sz;
    int b;

    switch (r->type) {
    case CT_INT:
        if (value_integer(v, &n) < 0) return fail(err, errlen, "'%s' must be an integer", key);
        if (n < r->min || n > r->max)
            return fail(err, errlen, "'%s' must be between %lld and %lld (got %lld)", key, r->min, r->max, n);
        *(int *)field = (int)n;
        return 0;
    case CT_SIZE:
    case CT_LL:
        if (value_size(v, &sz) < 0)
            return fail(err, errlen, "'%s' must be a size such as 512MB or 4GB", key);
        if (sz < (uint64_t)r->min || sz > (uint64_t)r->max)
            return fail(err, errlen, "'%s' must be between %lld and %lld bytes (got %llu)", key, r->min,
                        r->max, (unsigned long long)sz);
        if (r->type == CT_SIZE) *(uint64_t *)field = sz;
        else *(long long *)field = (long long)sz;
        return 0;
    case CT_BOOL:
        if (value_bool(v, &b) < 0) return fail(err, errlen, "'%s' must be yes or no", key);
        *(int *)field = b;
        return 0;
    case CT_STR:
        if (!v->text) return fail(err, errlen, "'%s' must be a string", key);
        if (strlen(v->text) >= (size_t)r->max)
            return fail(err, errlen, "'%s' must be shorter than %lld bytes", key, r->max);
        memcpy(field, v->text, strlen(v->text) + 1);
        return 0;
    case CT_ENUM:
        for (int i = 0; v->text && r->names[i]; i++) {
            if (!strieq_len(v->text, strlen(v->text), r->names[i])) continue;
            if (r->offset == OFF(role)) *(mkv_role *)field = (mkv_role)i;
            /* text enums, 16 bytes each */
            else if (r->offset == OFF(transport) || r->offset == OFF(shm_mode) || r->offset == OFF(disk_io))
                snprintf(field, sizeof cfg->transport, "%s", r->names[i]);
            else *(int *)field = i;
            return 0;
        }
        {
            char choices[128];
            enum_choices(r->names, choices, sizeof choices);
            return fail(err, errlen, "'%s' must be one of %s", key, choices);
        }
    case CT_LOGLEVEL:
        if (!v->text || (b = log_level_parse(v->text)) < 0)
            return fail(err, errlen, "'%s' must be one of debug, verbose, notice, warning, nothing", key);
        *(int *)field = b;
        return 0;
    case CT_ADDRS:
        return set_addrs(cfg, v, key, err, errlen);
    }
    return fail(err, errlen, "'%s' has an unsupported type", key);
}

/* ---- JSON files ------------------------------------------------------------ */

static char *read_file(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fail(err, errlen, "config error: cannot read '%s': %s", path, strerror(errno));
        return NULL;
    }
    char *buf = xmalloc(CONFIG_FILE_MAX + 1);
    size_t n = fread(buf, 1, CONFIG_FILE_MAX + 1, f);
    int rerr = ferror(f);
    fclose(f);
    if (rerr || n > CONFIG_FILE_MAX) {
        fail(err, errlen, "config error: cannot read '%s': %s", path,
             rerr ? "read error" : "file larger than 1MB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    return buf;
}

/* Line and column (1-based) of pos in text, for JSON error messages. */
static void text_position(const char *text, const char *pos, int *line, int *col) {
    *line = 1;
    *col = 1;
    for (const char *p = text; p < pos && *p; p++) {
        if (*p == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

/* The JSON text of a file (name is for messages only) over cfg. */
int config_load_text(mkv_config *cfg, const char *text, const char *name, char *err, size_t errlen) {
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithOpts(text, &end, 1);
    if (!root || !cJSON_IsObject(root)) {
        int line = 1, col = 1;
        if (!root && end) text_position(text, end, &line, &col);
        if (root) fail(err, errlen, "config error in %s: the top level must be a JSON object", name);
        else fail(err, errlen, "config error in %s: invalid JSON at line %d column %d", name, line, col);
        cJSON_Delete(root);
        return -1;
    }

    int rc = 0;
    char msg[512];
    const cJSON *item;
    cJSON_ArrayForEach(item, root) {
        const config_row *r = row_find(item->string, strlen(item->string));
        if (!r) {
            fail(err, errlen, "config error in %s: unknown key '%.64s'", name, item->string);
            rc = -1;
            break;
        }
        config_value v = {cJSON_IsString(item) ? item->valuestring : NULL, item};
        if (config_set(cfg, r, &v, item->string, msg, sizeof msg) < 0) {
            fail(err, errlen, "config error in %s: %s", name, msg);
            rc = -1;
            break;
        }
    }
    cJSON_Delete(root);
    return rc;
}

int config_load_file(mkv_config *cfg, const char *path, char *err, size_t errlen) {
    char *text = read_file(path, err, errlen);
    if (!text) return -1;
    int rc = config_load_text(cfg, text, path, err, errlen);
    if (rc == 0) snprintf(cfg->config_file, sizeof cfg->config_file, "%s", path);
    free(text);
    return rc;
}

/* ---- Command line ------------------------------------------------------------ */

static const char *type_hint(const config_row *r) {
    switch (r->type) {
    case CT_INT: return "N";
    case CT_SIZE:
    case CT_LL: return "SIZE";
    case CT_BOOL: return "yes|no";
    case CT_ADDRS: return "A,B";
    case CT_LOGLEVEL: return "LEVEL";
    case CT_ENUM: return "NAME";
    case CT_STR: break;
    }
    return "STR";
}

static void print_usage(FILE *out) {
    fprintf(out,
            "Usage: moonkv-server [--config FILE] [--key value ...]\n"
            "       moonkv-server --help | --version\n\n"
            "Every key of the JSON config file is also a flag (segment_size is\n"
            "--segment-size); flags win over the file.\n\n"
            "  --config FILE                JSON config file\n");
    for (size_t i = 0; i < CONFIG_NROWS; i++) {
        const config_row *r = &config_table[i];
        char flag[96];
        int n = snprintf(flag, sizeof flag, "--%s %s", r->name, type_hint(r));
        for (int j = 2; j < n && flag[j] != ' '; j++)
            if (flag[j] == '_') flag[j] = '-';
        fprintf(out, "  %-28s %s\n", flag, r->help);
    }
    fprintf(out, "  %-28s %s\n  %-28s %s\n", "--help", "show this help", "--version", "show the version");
}

/* Split "--name=value" or "--name value" at argv[*i]; advances *i past
 * the value. */
static int flag_split(int argc, char **argv, int *i, const char **name, size_t *namelen,
                      const char **value, char *err, size_t errlen) {
    const char *a = argv[*i];
    if (strncmp(a, "--", 2) != 0 || a[2] == '\0')
        return fail(err, errlen, "config error: unexpected argument '%s' (flags look like --port 7379)", a);
    *name = a + 2;
    const char *eq = strchr(*name, '=');
    if (eq) {
        *namelen = (size_t)(eq - *name);
        *value = eq + 1;
        return 0;
    }
    *namelen = strlen(*name);
    if (*i + 1 >= argc) return fail(err, errlen, "config error: '%s' needs a value", a);
    *value = argv[++*i];
    return 0;
}

static int is_flag(const char *a, const char *name) {
    return strcmp(a, name) == 0;
}

/* --group g: the group's keys under /moonkv/<cluster>/g/<g>/ (etcd/slotmap.h). */
static int group_cluster(mkv_config *cfg, char *err, size_t errlen) {
    snprintf(cfg->slot_cluster, sizeof cfg->slot_cluster, "%s", cfg->cluster_name);
    if (cfg->groups && !cfg->etcd[0]) return fail(err, errlen, "config error: 'groups' needs 'etcd' (the slot map lives there)");
    if (cfg->shared_groups[0] && (cfg->group[0] || !cfg->etcd[0]))
        return fail(err, errlen, "config error: 'shared_groups' needs 'etcd' and no 'group'");
    if (!cfg->group[0]) {
        if (cfg->slots[0]) return fail(err, errlen, "config error: 'slots' needs a 'group'");
        return 0;
    }
    for (const char *p = cfg->group; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == '-'))
            return fail(err, errlen, "config error: 'group' must be 1-31 of [A-Za-z0-9_-]");
    if (!cfg->etcd[0]) return fail(err, errlen, "config error: 'group' needs 'etcd' (the slot map lives there)");
    char name[sizeof cfg->cluster_name];
    int n = snprintf(name, sizeof name, "%s/g/%s", cfg->slot_cluster, cfg->group);
    if (n < 0 || (size_t)n >= sizeof name)
        return fail(err, errlen, "config error: 'cluster_name' and 'group' together must be under %zu bytes",
                    sizeof name - 3);
    memcpy(cfg->cluster_name, name, (size_t)n + 1);
    return 0;
}

int config_from_args(mkv_config *cfg, int argc, char **argv, char *err, size_t errlen) {
    /* --help/--version first, then the file, then every other flag over it. */
    for (int i = 0; i < argc; i++) {
        if (is_flag(argv[i], "--help") || is_flag(argv[i], "-h")) {
            print_usage(stdout);
            return 1;
        }
        if (is_flag(argv[i], "--version") || is_flag(argv[i], "-v")) {
            printf("moonkv-server v%s\n", MOONKV_VERSION);
            return 1;
        }
    }
    for (int i = 0; i < argc; i++) {
        const char *name, *value;
        size_t len;
        if (flag_split(argc, argv, &i, &name, &len, &value, err, errlen) < 0) return -1;
        if (len == 6 && strncmp(name, "config", 6) == 0 &&
            config_load_file(cfg, value, err, errlen) < 0)
            return -1;
    }
    for (int i = 0; i < argc; i++) {
        const char *name, *value;
        size_t len;
        char msg[512], flag[80];
        flag_split(argc, argv, &i, &name, &len, &value, err, errlen);
        if (len == 6 && strncmp(name, "config", 6) == 0) continue;
        snprintf(flag, sizeof flag, "--%.*s", (int)(len < 64 ? len : 64), name);
        const config_row *r = row_find(name, len);
        if (!r) return fail(err, errlen, "config error: unknown option '%s' (see --help)", flag);
        config_value v = {value, NULL};
        if (config_set(cfg, r, &v, flag, msg, sizeof msg) < 0)
            return fail(err, errlen, "config error: %s", msg);
    }
    if (cfg->io_threads > 1 && cfg->role != ROLE_GATEWAY)
        return fail(err, errlen, "config error: 'io_threads' (%d) is for the gateway role only "
                    "(this server's store belongs to one event loop)", cfg->io_threads);
    if (cfg->disk_high_watermark && cfg->disk_low_watermark >= cfg->disk_high_watermark)
        return fail(err, errlen, "config error: 'disk_low_watermark' (%d) must be below "
                    "'disk_high_watermark' (%d)", cfg->disk_low_watermark, cfg->disk_high_watermark);
    if (cfg->gc_low_watermark >= cfg->gc_high_watermark)
        return fail(err, errlen, "config error: 'gc_low_watermark' (%d) must be below "
                    "'gc_high_watermark' (%d)", cfg->gc_low_watermark, cfg->gc_high_watermark);
    return group_cluster(cfg, err, errlen);
}

/* ---- CONFIG GET ------------------------------------------------------------ */

const char *config_key_name(int i) {
    static char names[CONFIG_NROWS][32];
    if (i < 0 || (size_t)i >= CONFIG_NROWS) return NULL;
    /* Redis-style names use '-' (CONFIG GET segment-size). */
    if (!names[i][0]) {
        snprintf(names[i], sizeof names[i], "%s", config_table[i].name);
        for (char *p = names[i]; *p; p++)
            if (*p == '_') *p = '-';
    }
    return names[i];
}

const char *config_get_value(const mkv_config *cfg, const char *name, char *buf, size_t buflen) {
    const config_row *r = row_find(name, strlen(name));
    if (!r || buflen == 0) return NULL;
    const char *field = (const char *)cfg + r->offset;
    switch (r->type) {
    case CT_INT: snprintf(buf, buflen, "%d", *(const int *)field); break;
    case CT_SIZE: snprintf(buf, buflen, "%llu", (unsigned long long)*(const uint64_t *)field); break;
    case CT_LL: snprintf(buf, buflen, "%lld", *(const long long *)field); break;
    case CT_BOOL: snprintf(buf, buflen, "%s", *(const int *)field ? "yes" : "no"); break;
    case CT_STR: snprintf(buf, buflen, "%s", field); break;
    case CT_ENUM:
        if (r->offset == OFF(role)) snprintf(buf, buflen, "%s", config_role_name(cfg->role));
        else if (r->offset == OFF(transport) || r->offset == OFF(shm_mode) || r->offset == OFF(disk_io))
            snprintf(buf, buflen, "%s", field);
        else snprintf(buf, buflen, "%s", r->names[*(const int *)field]);
        break;
    case CT_LOGLEVEL: snprintf(buf, buflen, "%s", log_level_name((log_level)cfg->log_level)); break;
    case CT_ADDRS: {
        size_t off = 0;
        buf[0] = '\0';
        for (int i = 0; i < cfg->ndata_addrs && off < buflen; i++)
            off += (size_t)snprintf(buf + off, buflen - off, "%s%s", i ? "," : "", cfg->data_addrs[i]);
        break;
    }
    }
    return buf;
}
