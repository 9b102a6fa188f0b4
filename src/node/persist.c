/* node/persist.c - see persist.h. */
#include "node/persist.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "core/crc32c.h"
#include "core/log.h"
#include "core/siphash.h"
#include "core/util.h"
#include "core/workpool.h"
#include "node/journal.h"
#include "server/info.h"

#define PS_MAGIC "MOONKVSG"
#define PS_VERSION 1
#define PS_META 4096                 /* the header page after the segment */
#define PS_HUGE_META (2ULL << 20)    /* on hugetlbfs a file is whole huge pages */
#define PS_HUGETLBFS_MAGIC 0x958458f6
#define PS_PROVE_THREADS 8

/* The header page's start (native layout: the file never leaves the host). */
typedef struct ps_header {
    char magic[8];
    uint32_t version, node_id;
    uint64_t segment_size, generation;
    uint64_t cluster_hash, secret_hash;
    char cluster[64];
    uint32_t crc;                    /* crc32c of the bytes before it */
} ps_header;

struct node_persist {
    char path[PATH_MAX], log_path[PATH_MAX + 8];
    char side_path[PATH_MAX + 40];   /* node_persist_side_write's file ("": none) */
    ps_header *hdr;                  /* mapped after the segment */
    uint64_t meta;                   /* bytes of the header page(s) */
    node_journal *jr;
    const char *state;               /* fresh, restored, dropped */
    uint64_t restored, proof_failed, proof_bytes, replay_ms, proof_ms, cut_bytes;
};

static const uint8_t ps_hash_key[SIPHASH_KEY_LEN] = "moonkv.segment\0";

static uint64_t hash_str(const char *s) { return siphash24(s, strlen(s), ps_hash_key); }

int node_persist_wanted(const mkv_config *cfg) {
    return cfg->segment_persist && (cfg->segment_file[0] || cfg->port > 0);
}

void node_file_cluster_part(const mkv_config *cfg, char *out, size_t len) {
    size_t i = 0;
    for (; cfg->cluster_name[i] && i + 1 < len; i++) {
        char ch = cfg->cluster_name[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                 ch == '_' || ch == '-';
        out[i] = ok ? ch : '_';
    }
    if (len > 0) out[i] = 0;
}

static void file_name(const mkv_config *cfg, char *out, size_t len) {
    char name[sizeof cfg->cluster_name];
    node_file_cluster_part(cfg, name, sizeof name);
    if (cfg->segment_file[0]) snprintf(out, len, "%s", cfg->segment_file);
    else snprintf(out, len, "/dev/shm/moonkv-%s-%d.seg", name, cfg->port);
}

/* Where the log goes: beside the file, unless that is hugetlbfs (no
 * write(2) there): then in /dev/shm under the file's name. */
static void log_name(const char *path, int huge, char *out, size_t len) {
    const char *base = strrchr(path, '/');
    if (huge) snprintf(out, len, "/dev/shm/%.4000s.idx", base ? base + 1 : path);
    else snprintf(out, len, "%.4000s.idx", path);
}

static uint32_t header_crc(const ps_header *h) { return crc32c(0, h, offsetof(ps_header, crc)); }

static void header_init(ps_header *h, const mkv_config *cfg, uint64_t size) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, PS_MAGIC, 8);
    h->version = PS_VERSION;
    h->segment_size = size;
    h->cluster_hash = hash_str(cfg->cluster_name);
    h->secret_hash = hash_str(cfg->cluster_secret);
    snprintf(h->cluster, sizeof h->cluster, "%s", cfg->cluster_name);
    do
        if (random_bytes(&h->generation, sizeof h->generation) != 0) h->generation = mono_us() ^ (uint64_t)getpid();
    while (h->generation == 0);
    h->crc = header_crc(h);
}

/* Why the header h is not for this node (0: it is). */
static int header_refusal(const ps_header *h, const mkv_config *cfg, uint64_t size, char *why, size_t len) {
    if (memcmp(h->magic, PS_MAGIC, 8) != 0 || h->version != PS_VERSION || h->crc != header_crc(h)) {
        snprintf(why, len, "is not a moonkv segment file of this version (or its header is damaged)");
    } else if (h->segment_size != size) {
        snprintf(why, len, "holds a segment of %llu bytes, this node's --segment-size is %llu",
                 (unsigned long long)h->segment_size, (unsigned long long)size);
    } else if (h->cluster_hash != hash_str(cfg->cluster_name)) {
        snprintf(why, len, "belongs to cluster '%.64s', this node to '%s'", h->cluster, cfg->cluster_name);
    } else if (h->secret_hash != hash_str(cfg->cluster_secret)) {
        snprintf(why, len, "belongs to a cluster with another cluster_secret");
    } else if (cfg->node_id && h->node_id && (uint32_t)cfg->node_id != h->node_id) {
        snprintf(why, len, "is node %u's, this node claims --node-id %d", h->node_id, cfg->node_id);
    } else {
        return 0;
    }
    return 1;
}

static void refuse(const node_persist *p, const char *why, char *err, size_t errlen) {
    snprintf(err, errlen, "segment file %s %s: not starting. If its objects are not wanted, remove it "
             "(rm -f %s %s) or name another with --segment-file (--segment-persist no: no file)",
             p->path, why, p->path, p->log_path);
}

/* The existing file's header, read where a file of fsize bytes has it. */
static int read_header(int fd, uint64_t fsize, uint64_t meta, ps_header *h) {
    memset(h, 0, sizeof *h);
    if (fsize < meta) return -1;
    return pread(fd, h, sizeof *h, (off_t)(fsize - meta)) == (ssize_t)sizeof *h ? 0 : -1;
}

static void open_fail(node_persist *p, int fd, const char *what, char *err, size_t errlen) {
    snprintf(err, errlen, "segment file %s: %s: %s", p->path, what, strerror(errno));
    if (fd >= 0) close(fd);
    free(p);
}

/* Whether fd's file system has bytes free (a file past that would fault
 * with SIGBUS when its pages are touched). */
static int room_for(int fd, uint64_t bytes) {
    struct statfs fs;
    return fstatfs(fd, &fs) != 0 || (uint64_t)fs.f_bavail * (uint64_t)fs.f_bsize >= bytes;
}

node_persist *node_persist_open(const mkv_config *cfg, node_segment *seg, int *use_memfd, char *err,
                                size_t errlen) {
    node_persist *p = xcalloc(1, sizeof *p);
    *use_memfd = 0;
    uint64_t size = cfg->segment_size, t0 = mono_us();
    file_name(cfg, p->path, sizeof p->path);
    struct statfs fs;
    int huge = statfs(p->path, &fs) == 0 ? fs.f_type == PS_HUGETLBFS_MAGIC : 0;
    if (!huge) {   /* a new file: its directory says */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", p->path);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = 0;
        huge = statfs(slash ? (dir[0] ? dir : "/") : ".", &fs) == 0 && fs.f_type == PS_HUGETLBFS_MAGIC;
    }
    p->meta = huge ? PS_HUGE_META : PS_META;
    log_name(p->path, huge, p->log_path, sizeof p->log_path);
    int fd = open(p->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        open_fail(p, fd, "cannot open", err, errlen);
        return NULL;
    }
    /* One process per file: two nodes writing one segment would corrupt both. */
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        open_fail(p, fd, errno == EWOULDBLOCK ? "in use by another process" : "cannot lock", err, errlen);
        return NULL;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        open_fail(p, fd, "cannot stat", err, errlen);
        return NULL;
    }
    uint64_t fsize = (uint64_t)sb.st_size;
    int fresh = fsize == 0;
    if (!fresh) {
        ps_header h;
        char why[256] = "";
        if (read_header(fd, fsize, p->meta, &h) != 0)
            snprintf(why, sizeof why, "is not a moonkv segment file (%llu bytes)", (unsigned long long)fsize);
        else if (!header_refusal(&h, cfg, size, why, sizeof why) && fsize != size + p->meta)
            snprintf(why, sizeof why, "is %llu bytes, not %llu", (unsigned long long)fsize,
                     (unsigned long long)(size + p->meta));
        if (why[0]) {
            refuse(p, why, err, errlen);
            close(fd);
            free(p);
            return NULL;
        }
    } else if (!room_for(fd, size + p->meta)) {
        /* A node that started before (on a memfd, not bounded by the
         * tmpfs's size: 64 MB in a default container) still starts. */
        log_warning("segment file %s: its file system has no room for %llu bytes: the segment is a memfd "
                    "instead, and a restart of this node will not keep its objects (make room, or name another "
                    "place with --segment-file)", p->path, (unsigned long long)(size + p->meta));
        unlink(p->path);
        close(fd);
        free(p);
        *use_memfd = 1;
        return NULL;
    } else if (ftruncate(fd, (off_t)(size + p->meta)) != 0) {
        open_fail(p, fd, "cannot size", err, errlen);
        return NULL;
    }
    void *base = mmap(NULL, size + p->meta, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        open_fail(p, fd, "cannot map", err, errlen);
        return NULL;
    }
    memset(seg, 0, sizeof *seg);
    seg->base = base;
    seg->size = size;
    seg->fd = fd;
    seg->backing = huge ? "hugetlbfs-file" : "file";
    p->hdr = (ps_header *)((char *)base + size);
    if (fresh) header_init(p->hdr, cfg, size);
    p->state = fresh ? "fresh" : "restored";
    if (!huge) madvise(base, size, MADV_HUGEPAGE);
    /* Pages already there are only mapped, not cleared: the bytes stay.
     * A restart is not warmed for the kernel's copies (a pass over every
     * page, seconds per GB on a VM that traps each 4 KiB page's first
     * touch): it would hold the node back from serving; its proof reads
     * every object's pages anyway. */
    if (cfg->prefault && fresh) node_segment_prefault(seg);
    else if (cfg->prefault) node_segment_populate(seg);
    seg->prefault_ms = (mono_us() - t0) / 1000;
    log_notice("segment: %llu bytes in %s (%s file, %s), mapped in %llu ms", (unsigned long long)size, p->path,
               fresh ? "a new" : "an existing", seg->backing, (unsigned long long)seg->prefault_ms);
    return p;
}

/* ---- the index ---- */

typedef struct replay_ctx {
    node_index *ix;
    node_index_batch *b;   /* the index's batches: lookups prefetched, one lock per batch */
} replay_ctx;

static void replay_one(void *arg, const proto_note *n) {
    replay_ctx *rc = arg;
    if (!n) node_index_commit(rc->ix, rc->b);   /* the end: before the log's bytes go */
    else if (n->drop) node_index_batch_drop(rc->ix, rc->b, n->key, n->keylen);
    else node_index_batch_hold(rc->ix, rc->b, n->key, n->keylen, n->size, n->crc, n->want, &n->rep, &n->slices,
                               JOURNAL_SELF);
}

/* Nothing (more) to trust: a new generation, so no log of the old one
 * can ever be read against this file again. */
static void start_empty(node_persist *p, node_index *ix) {
    char err[PATH_MAX + 128];
    node_index_clear(ix);
    uint64_t gen;
    do
        if (random_bytes(&gen, sizeof gen) != 0) gen = mono_us() ^ p->hdr->generation;
    while (gen == 0 || gen == p->hdr->generation);
    p->hdr->generation = gen;
    p->hdr->crc = header_crc(p->hdr);
    p->jr = node_journal_create(p->log_path, gen, err, sizeof err);
    if (!p->jr) log_warning("node: %s: the index will not survive a restart", err);
}

static void prove(node_persist *p, node_index *ix) {
    uint64_t t0 = mono_us();
    int helpers = workpool_helpers_for_cores(PS_PROVE_THREADS - 1);
    workpool *wp = helpers > 0 ? workpool_start(helpers) : NULL;
    p->proof_failed = node_index_prove_all(ix, wp, &p->proof_bytes);
    workpool_stop(wp);
    p->proof_ms = (mono_us() - t0) / 1000;
}

void node_persist_load(node_persist *p, node_index *ix) {
    if (!strcmp(p->state, "fresh")) {
        start_empty(p, ix);
        node_index_attach(ix, p->jr);
        return;
    }
    uint64_t t0 = mono_us();
    char why[PATH_MAX + 128];
    replay_ctx rc = {ix, node_index_batch_new()};
    p->jr = node_journal_replay(p->log_path, p->hdr->generation, replay_one, &rc, &p->cut_bytes, why, sizeof why);
    node_index_batch_free(rc.b);
    p->replay_ms = (mono_us() - t0) / 1000;
    if (!p->jr) {
        log_warning("node: %s: the index is dropped whole, the segment starts empty (the master copies "
                    "our objects again from other replicas)", why);
        p->state = "dropped";
        start_empty(p, ix);
        node_index_attach(ix, p->jr);
        return;
    }
    node_index_attach(ix, p->jr);   /* the proof's drops are logged */
    prove(p, ix);
    node_index_stats st;
    node_index_get_stats(ix, &st);
    p->restored = st.objects;
    double gbs = p->proof_ms ? (double)p->proof_bytes / 1e6 / (double)p->proof_ms : 0;
    log_notice("node: index back from %s: %llu objects (log read in %llu ms%s), proved %llu bytes in %llu ms "
               "(%.2f GB/s), %llu failed their CRC32C and were dropped", p->log_path,
               (unsigned long long)st.objects, (unsigned long long)p->replay_ms,
               p->cut_bytes ? ", a torn last record cut" : "", (unsigned long long)p->proof_bytes,
               (unsigned long long)p->proof_ms, gbs, (unsigned long long)p->proof_failed);
}

int node_persist_restored(const node_persist *p) { return p && !strcmp(p->state, "restored"); }

uint32_t node_persist_node_id(const node_persist *p) { return p ? p->hdr->node_id : 0; }

void node_persist_set_node_id(node_persist *p, uint32_t id) {
    if (!p || p->hdr->node_id == id) return;
    p->hdr->node_id = id;
    p->hdr->crc = header_crc(p->hdr);
}

#define PS_SIDE_HEAD "moonkv-side 1 "

static void side_name(const node_persist *p, const char *suffix, char *out, size_t len) {
    size_t base = strlen(p->log_path) - strlen(".idx");   /* the log's place, the log's name */
    snprintf(out, len, "%.*s%s", (int)base, p->log_path, suffix);
}

int node_persist_side_write(node_persist *p, const char *suffix, const char *text, size_t len) {
    char tmp[sizeof p->side_path + 8];
    side_name(p, suffix, p->side_path, sizeof p->side_path);
    snprintf(tmp, sizeof tmp, "%s.tmp", p->side_path);
    FILE *f = fopen(tmp, "we");
    int ok = f && fprintf(f, PS_SIDE_HEAD "%016llx\n", (unsigned long long)p->hdr->generation) > 0 &&
             fwrite(text, 1, len, f) == len;
    if (f && fclose(f) != 0) ok = 0;
    if (ok && rename(tmp, p->side_path) == 0) return 0;
    log_warning("node: cannot write %s: %s", p->side_path, strerror(errno));
    unlink(tmp);
    return -1;
}

int node_persist_side_read(node_persist *p, const char *suffix, char **out, size_t max) {
    char path[sizeof p->side_path], head[64];
    side_name(p, suffix, path, sizeof path);
    snprintf(head, sizeof head, PS_SIDE_HEAD "%016llx\n", (unsigned long long)p->hdr->generation);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char *buf = xmalloc(max + 1);
    size_t n = fread(buf, 1, max + 1, f);
    fclose(f);
    size_t hl = strlen(head);
    if (n > max || n < hl || memcmp(buf, head, hl) != 0) {
        free(buf);
        return -1;
    }
    memmove(buf, buf + hl, n - hl);
    buf[n - hl] = 0;
    *out = buf;
    return 0;
}

void node_persist_info(const node_persist *p, resp_buf *out) {
    info_field(out, "segment_file", "%s", p ? p->path : "");
    info_field(out, "segment_persist_state", "%s", p ? p->state : "off");
    if (!p) return;
    info_field(out, "segment_restored_objects", "%llu", (unsigned long long)p->restored);
    info_field(out, "segment_replay_ms", "%llu", (unsigned long long)p->replay_ms);
    info_field(out, "segment_proof_ms", "%llu", (unsigned long long)p->proof_ms);
    info_field(out, "segment_proof_bytes", "%llu", (unsigned long long)p->proof_bytes);
    info_field(out, "segment_proof_failed", "%llu", (unsigned long long)p->proof_failed);
    info_field(out, "segment_log_cut_bytes", "%llu", (unsigned long long)p->cut_bytes);
}

void node_persist_close(node_persist *p, int remove) {
    if (!p) return;
    node_journal_free(p->jr);
    if (remove) {
        unlink(p->log_path);
        if (p->side_path[0]) unlink(p->side_path);
        unlink(p->path);
        log_notice("node: left the cluster: %s removed", p->path);
    }
    munmap(p->hdr, p->meta);
    free(p);
}
