/* node/disk_tier.c - see disk_tier.h. */
#include "node/disk_tier.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/siphash.h"
#include "core/util.h"
#include "node/persist.h"
#include "server/info.h"

static const uint8_t tier_hash_key[SIPHASH_KEY_LEN] = "moonkv.disktier";

int node_disk_wanted(const mkv_config *cfg) { return cfg->disk_dir[0] != 0; }

/* The cluster's name and secret (and "shared" on a node shared by
 * groups: its keys carry their group), as the file's owner tag. */
static uint64_t owner_tag(const mkv_config *cfg) {
    char buf[sizeof cfg->cluster_name + CONFIG_STR_MAX + 8];
    size_t a = strlen(cfg->cluster_name), b = strlen(cfg->cluster_secret);
    memcpy(buf, cfg->cluster_name, a);
    buf[a] = 0;
    memcpy(buf + a + 1, cfg->cluster_secret, b);
    size_t len = a + 1 + b;
    if (cfg->shared_groups[0]) memcpy(buf + len, "\0shared", 7), len += 7;
    return siphash24(buf, len, tier_hash_key);
}

size_t node_disk_key(const char *group, const void *key, size_t keylen, char *out) {
    size_t g = strlen(group);
    if (g) memcpy(out, group, g + 1), g++;   /* with its NUL: no group name holds one */
    memcpy(out + g, key, keylen);
    return g + keylen;
}

size_t node_disk_take_rotten(disk_store *ds, const char *group, disk_key *out, size_t max) {
    size_t g = strlen(group), n = disk_store_take_rotten(ds, group, g ? g + 1 : 0, out, max);   /* with its NUL */
    for (size_t i = 0; g && i < n; i++) {
        out[i].keylen -= g + 1;
        memmove(out[i].key, out[i].key + g + 1, out[i].keylen);
    }
    return n;
}

/* key's length without group's prefix, or -1 if it is not group's. */
static long unprefixed(const char *group, const void *key, size_t keylen) {
    size_t g = strlen(group);
    if (!g) return (long)keylen;
    if (keylen <= g + 1 || memcmp(key, group, g) != 0 || ((const char *)key)[g] != 0) return -1;
    return (long)(keylen - g - 1);
}

static void file_name(const mkv_config *cfg, char *out, size_t len) {
    char name[sizeof cfg->cluster_name];
    node_file_cluster_part(cfg, name, sizeof name);
    snprintf(out, len, "moonkv-%s-%d.disk", name, cfg->port);
}

disk_store *node_disk_open(const mkv_config *cfg, int *fatal, char *err, size_t errlen) {
    *fatal = 1;
    if (cfg->disk_size == 0) {
        snprintf(err, errlen, "--disk-dir needs --disk-size (e.g. 512MB)");
        return NULL;
    }
    disk_io_kind io = DISK_IO_AUTO;
    disk_io_parse(cfg->disk_io, &io);
    char name[128];
    file_name(cfg, name, sizeof name);
    disk_store_config c = { .dir = cfg->disk_dir, .name = name, .size = cfg->disk_size, .io = io,
                            .tag = owner_tag(cfg), .prefixed = cfg->shared_groups[0] != 0 };
    disk_store *ds = disk_store_open(&c, err, errlen);
    if (!ds && (errno == ENOSPC || errno == EFBIG)) {
        log_warning("disk: %s: the node runs without its disk tier", err);
        *fatal = 0;
    }
    return ds;
}

/* The records, collected under the store's lock (key offsets into keys:
 * the buffer moves as it grows). */
typedef struct collect {
    const char *group;
    proto_report_rec *r;
    size_t n, cap;
    char *keys;
    size_t used, room;
} collect;

static void collect_add(collect *c, size_t key_at, size_t keylen, uint64_t obj_off, uint64_t len, const disk_obj *of) {
    if (c->n == c->cap) c->r = xrealloc(c->r, (c->cap = c->cap ? 2 * c->cap : 256) * sizeof *c->r);
    c->r[c->n++] = (proto_report_rec){.key = (const char *)(uintptr_t)key_at, .keylen = keylen, .size = of->size,
                                      .crc = of->crc, .want = 1, .obj_off = obj_off,
                                      .seg_off = PROTO_REPORT_ON_DISK, .length = len};
}

/* A record is reported whole (obj_off 0), or a share piece by piece
 * (each where it lies in the object: a master rebuilding its table
 * chains every node's pieces into the object again); a share from
 * before pieces were kept, as one extent of its length. */
static void collect_one(void *ctx, const void *key, size_t keylen, uint64_t len, uint32_t crc, const disk_obj *of) {
    collect *c = ctx;
    long own = unprefixed(c->group, key, keylen);
    if (own < 0) return;   /* another group's */
    key = (const char *)key + (keylen - (size_t)own);
    keylen = (size_t)own;
    if (c->used + keylen > c->room) c->keys = xrealloc(c->keys, c->room = 2 * (c->used + keylen) + 4096);
    memcpy(c->keys + c->used, key, keylen);
    (void)crc;   /* a share's own: the object's is what the master knows */
    if (of->npieces == 0) collect_add(c, c->used, keylen, 0, len, of);
    for (uint32_t i = 0; i < of->npieces; i++) collect_add(c, c->used, keylen, of->pieces[i].off, of->pieces[i].len, of);
    c->used += keylen;
}

size_t node_disk_reports(disk_store *ds, const char *group, uint64_t *cursor, size_t max, proto_report_rec **recs,
                         char **keys) {
    collect c = {.group = group};
    *cursor = ds ? disk_store_scan(ds, *cursor, max, collect_one, &c) : 0;
    for (size_t i = 0; i < c.n; i++) c.r[i].key = c.keys + (uintptr_t)c.r[i].key;
    *recs = c.r;
    *keys = c.keys;
    return c.n;
}

#define FORGET_STEP 4096   /* records collected, then removed */

size_t node_disk_forget(disk_store *ds, const char *group) {
    size_t gone = 0;
    uint64_t cursor = 0;
    char *full = xmalloc(NODE_DISK_KEY_MAX);
    do {
        proto_report_rec *r;
        char *keys;
        size_t n = node_disk_reports(ds, group, &cursor, FORGET_STEP, &r, &keys);
        for (size_t i = 0; i < n; i++)
            gone += disk_store_remove(ds, full, node_disk_key(group, r[i].key, r[i].keylen, full)) == 0;
        free(r);
        free(keys);
    } while (cursor);
    free(full);
    return gone;
}

void node_disk_info(disk_store *ds, resp_buf *out) {
    info_field(out, "disk_tier", "%s", ds ? "on" : "off");
    if (!ds) return;
    disk_store_stats st;
    disk_store_get_stats(ds, &st);
    info_field(out, "disk_file", "%s", disk_store_path(ds));
    info_field(out, "disk_io", "%s", disk_store_io_name(ds));
    info_field(out, "disk_bytes_total", "%llu", (unsigned long long)st.capacity);
    info_field(out, "disk_bytes_used", "%llu", (unsigned long long)st.used);
    info_field(out, "disk_bytes_free", "%llu", (unsigned long long)(st.capacity - st.used));
    info_field(out, "disk_objects", "%llu", (unsigned long long)st.objects);
    info_field(out, "disk_writes", "%llu", (unsigned long long)st.writes);
    info_field(out, "disk_write_bytes", "%llu", (unsigned long long)st.write_bytes);
    info_field(out, "disk_write_seconds", "%.6f", (double)st.write_us / 1e6);
    info_field(out, "disk_reads", "%llu", (unsigned long long)st.reads);
    info_field(out, "disk_read_bytes", "%llu", (unsigned long long)st.read_bytes);
    info_field(out, "disk_read_seconds", "%.6f", (double)st.read_us / 1e6);
    info_field(out, "disk_removes", "%llu", (unsigned long long)st.removes);
    info_field(out, "disk_nospace", "%llu", (unsigned long long)st.nospace);
    info_field(out, "disk_io_errors", "%llu", (unsigned long long)st.io_errors);
    info_field(out, "disk_checksum_errors", "%llu", (unsigned long long)st.checksum_errors);
    info_field(out, "disk_recovered", "%llu", (unsigned long long)st.recovered);
    info_field(out, "disk_dropped", "%llu", (unsigned long long)st.dropped);
    info_field(out, "disk_scan_ms", "%llu", (unsigned long long)st.scan_ms);
}

static int tier_read(void *ctx, uint64_t tag, uint64_t size, uint32_t crc, uint64_t from, uint64_t to,
                     te_disk_put *put, void *sink) {
    return disk_store_read_tagged(ctx, tag, size, crc, from, to, put, sink);
}

void node_disk_reader(disk_store *ds, te_disk_reader *out) {
    *out = (te_disk_reader){ds ? tier_read : NULL, ds};
}
