/* node/disk_store.c - see disk_store.h. */
#include "node/disk_store.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cap.h"
#include "backend/le.h"
#include "core/alloc.h"
#include "core/crc32c.h"
#include "core/log.h"
#include "core/objtable.h"
#include "core/siphash.h"
#include "core/util.h"

#define BLK DISK_IO_ALIGN
#define FILE_MAGIC "MKVDISK1"
#define REC_MAGIC "MKVDREC1"
#define FILE_VERSION 1
#define REC_FIXED 48              /* magic | file id | seq | len | crc | keylen | obj crc | share | pieces | 1 reserved */
#define REC_SHARE 8               /* a share's object size, after the key */
#define REC_PIECE 16              /* a share's piece: object offset, length (after the object size) */
#define PIECE DISK_STAGE_BYTES    /* bytes per request (1 MiB pieces wrote 4 MiB values at half fio's speed) */
#define SCAN_BYTES (DISK_STAGE_SLOTS * DISK_STAGE_BYTES)   /* the scan's window: the whole staging area */
#define SCAN_MAX_REQS (SCAN_BYTES / PIECE)

/* What the index keeps per record, in its object's room (the object's
 * size and crc are the value's). */
typedef struct rec {
    uint64_t off, seq;
    uint32_t hdr;                 /* header bytes */
    uint32_t dead;                /* unlinked: freed by its last reader */
    disk_obj of;                  /* what it holds (a share: less than the object; its pieces ours) */
} rec;

struct disk_store {
    char path[PATH_MAX];
    disk_io *io;
    uint64_t size, file_id, tag;
    int prefixed;                 /* disk_store_config's */
    pthread_mutex_t mu;           /* ix, alloc, next_seq, st */
    objtable *ix;
    objtable *bytag;              /* key tag (te_cap_disk_tag) -> its record: disk reads name that */
    seg_alloc *alloc;             /* [BLK, size) as offsets from BLK */
    uint64_t next_seq;
    disk_store_stats st;
    pthread_mutex_t smu;          /* the staging slots */
    pthread_cond_t scv;
    uint8_t *stage_mem;           /* the slots, one after another (the scan's window) */
    uint8_t *stage[DISK_STAGE_SLOTS];
    int stage_busy[DISK_STAGE_SLOTS];
    uint8_t *zero;                /* 2 blocks of zeros: a header wiped */
    disk_key rotten[DISK_ROTTEN_MAX];   /* keys of records a read dropped, for the master */
    size_t nrotten;
};

static uint64_t round_blk(uint64_t n) { return (n + BLK - 1) & ~(uint64_t)(BLK - 1); }
static uint32_t hdr_bytes(size_t keylen, int share, uint32_t npieces) {
    return (uint32_t)round_blk(REC_FIXED + keylen + (share ? REC_SHARE + (uint64_t)npieces * REC_PIECE : 0) + 4);
}
#define MAX_HDR hdr_bytes(DISK_MAX_KEY, 1, DISK_MAX_PIECES)

/* A share's pieces (if it has any) tile its len bytes in object order,
 * inside the object. */
static int pieces_ok(const disk_piece *p, uint32_t n, uint64_t len, uint64_t size) {
    if (n == 0) return 1;
    uint64_t sum = 0, end = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (p[i].len == 0 || p[i].off < end || p[i].off > size || p[i].len > size - p[i].off) return 0;
        end = p[i].off + p[i].len;
        sum += p[i].len;
    }
    return n <= DISK_MAX_PIECES && sum == len;
}

static uint8_t *aligned(size_t n) {
    void *p = NULL;
    if (posix_memalign(&p, BLK, n) != 0) return NULL;
    memset(p, 0, n);   /* touched now, not on the first put */
    return p;
}

/* ---- staging ---- */

static int stage_take(disk_store *ds) {
    pthread_mutex_lock(&ds->smu);
    for (;;) {
        for (int i = 0; i < DISK_STAGE_SLOTS; i++)
            if (!ds->stage_busy[i]) {
                ds->stage_busy[i] = 1;
                pthread_mutex_unlock(&ds->smu);
                return i;
            }
        pthread_cond_wait(&ds->scv, &ds->smu);
    }
}

static void stage_give(disk_store *ds, int i) {
    pthread_mutex_lock(&ds->smu);
    ds->stage_busy[i] = 0;
    pthread_cond_signal(&ds->scv);
    pthread_mutex_unlock(&ds->smu);
}

/* ---- headers ---- */

static void file_header(const disk_store *ds, uint8_t *h) {
    memset(h, 0, BLK);
    memcpy(h, FILE_MAGIC, 8);
    le_put32(h + 8, FILE_VERSION);
    le_put32(h + 12, BLK);
    le_put64(h + 16, ds->size);
    le_put64(h + 24, ds->file_id);
    le_put64(h + 32, ds->tag);
    le_put32(h + BLK - 4, crc32c(0, h, BLK - 4));
}

/* A share's header says so (and its object's size); a whole object's has
 * zeros there, as every record before shares had. */
static int is_share(uint64_t len, uint32_t crc, const disk_obj *of) { return of->size != len || of->crc != crc; }

static void rec_header(const disk_store *ds, uint8_t *h, uint32_t hdr, const void *key, size_t keylen,
                       uint64_t seq, uint64_t len, uint32_t crc, const disk_obj *of) {
    memset(h, 0, hdr);
    memcpy(h, REC_MAGIC, 8);
    le_put64(h + 8, ds->file_id);
    le_put64(h + 16, seq);
    le_put64(h + 24, len);
    le_put32(h + 32, crc);
    le_put32(h + 36, (uint32_t)keylen);
    memcpy(h + REC_FIXED, key, keylen);
    if (is_share(len, crc, of)) {
        le_put32(h + 40, of->crc);
        h[44] = 1;
        le_put16(h + 45, (uint16_t)of->npieces);
        le_put64(h + REC_FIXED + keylen, of->size);
        uint8_t *p = h + REC_FIXED + keylen + REC_SHARE;
        for (uint32_t i = 0; i < of->npieces; i++, p += REC_PIECE) {
            le_put64(p, of->pieces[i].off);
            le_put64(p + 8, of->pieces[i].len);
        }
    }
    le_put32(h + hdr - 4, crc32c(0, h, hdr - 4));
}

typedef struct rec_hdr {
    const uint8_t *key;
    uint32_t keylen, hdr, crc;
    uint64_t seq, len;
    disk_obj of;                  /* its pieces in the caller's room (rec_parse's) */
} rec_hdr;

/* The first block at off: 1 and the header's length in *hdr if it could
 * start a record of this file (the rest is checked by rec_parse). */
static int rec_peek(const disk_store *ds, const uint8_t *b, uint64_t off, uint32_t *hdr) {
    if (memcmp(b, REC_MAGIC, 8) != 0 || le_get64(b + 8) != ds->file_id) return 0;
    uint32_t keylen = le_get32(b + 36), npieces = le_get16(b + 45);
    if (keylen == 0 || keylen > DISK_MAX_KEY || b[44] > 1 || npieces > (b[44] ? DISK_MAX_PIECES : 0)) return 0;
    *hdr = hdr_bytes(keylen, b[44], npieces);
    return off + *hdr <= ds->size;
}

/* The header at b into r; a share's pieces into pieces (room for
 * DISK_MAX_PIECES): pieces that do not tile the value are not trusted. */
static int rec_parse(const disk_store *ds, const uint8_t *b, uint64_t off, uint32_t hdr, rec_hdr *r,
                     disk_piece *pieces) {
    if (le_get32(b + hdr - 4) != crc32c(0, b, hdr - 4)) return 0;
    r->hdr = hdr;
    r->seq = le_get64(b + 16);
    r->len = le_get64(b + 24);
    r->crc = le_get32(b + 32);
    r->keylen = le_get32(b + 36);
    r->key = b + REC_FIXED;
    r->of = b[44] ? (disk_obj){le_get64(b + REC_FIXED + r->keylen), le_get32(b + 40), le_get16(b + 45), pieces}
                  : (disk_obj){r->len, r->crc, 0, NULL};
    const uint8_t *p = b + REC_FIXED + r->keylen + REC_SHARE;
    for (uint32_t i = 0; i < r->of.npieces; i++, p += REC_PIECE) pieces[i] = (disk_piece){le_get64(p), le_get64(p + 8)};
    return r->len <= ds->size - off - hdr && r->len <= r->of.size &&
           pieces_ok(pieces, r->of.npieces, r->len, r->of.size);
}

/* ---- index ---- */

static rec *room(object *o) { return objtable_room(o); }

static void rec_free(object *o) {
    free((void *)room(o)->of.pieces);
    object_free(o);
}

static void ix_free_fn(object *o, void *ctx) {
    (void)ctx;
    rec_free(o);
}

/* The tag table's entries own nothing (their room is a tagged, not a rec). */
static void tag_free_fn(object *o, void *ctx) {
    (void)ctx;
    object_free(o);
}
static uint64_t rec_bytes(object *o) { return room(o)->hdr + round_blk(o->size); }

/* Takes o's space back (its header wiped first, so the record cannot
 * come back once other bytes land there) and frees o. */
static void rec_release(disk_store *ds, object *o) {
    rec *r = room(o);
    disk_req z = { 1, ds->zero, r->off, r->hdr, NULL, 0 };
    int rc = disk_io_run(ds->io, &z, 1);
    pthread_mutex_lock(&ds->mu);
    if (rc != 0) ds->st.io_errors++;
    if (rc == 0) {
        seg_alloc_release(ds->alloc, r->off - BLK, rec_bytes(o));
        ds->st.used -= rec_bytes(o);
    }
    /* else: the space stays taken (its header may still be valid) */
    ds->st.objects--;
    pthread_mutex_unlock(&ds->mu);
    rec_free(o);
}

/* ---- records by key tag (a TE_READ_DISK names its record by it) ---- */

typedef struct tagged {
    object *o;                    /* NULL: two keys share the tag, neither is served by it */
} tagged;

static void tag_key(const disk_store *ds, const object *o, uint8_t k[8]) {
    const char *key = o->key, *nul = ds->prefixed ? memchr(key, 0, o->keylen) : NULL;
    size_t skip = nul ? (size_t)(nul - key) + 1 : 0;   /* a group's prefix: the tag is the client's key's */
    le_put64(k, te_cap_disk_tag(key + skip, o->keylen - skip));
}

static void tag_add(disk_store *ds, object *o) {
    uint8_t k[8];
    tag_key(ds, o, k);
    int existed = 0;
    object *t = objtable_insert_room(ds->bytag, k, sizeof k, sizeof(tagged), &existed);
    if (t) ((tagged *)objtable_room(t))->o = o;
    else if (existed) ((tagged *)objtable_room(objtable_find(ds->bytag, k, sizeof k)))->o = NULL;
}

static void tag_del(disk_store *ds, object *o) {
    uint8_t k[8];
    tag_key(ds, o, k);
    object *t = objtable_find(ds->bytag, k, sizeof k);
    if (t && ((tagged *)objtable_room(t))->o == o) objtable_delete(ds->bytag, k, sizeof k);
}

/* Unlinks key's record (under mu): its object, or NULL. */
static object *ix_unlink(disk_store *ds, const void *key, size_t keylen) {
    object *o = objtable_unlink(ds->ix, key, keylen);
    if (o) tag_del(ds, o);
    return o;
}

/* Files a record (under mu); the object it replaced, unlinked, or NULL. */
static object *ix_put(disk_store *ds, const void *key, size_t keylen, uint64_t len, uint32_t crc,
                      uint64_t off, uint64_t seq, uint32_t hdr, const disk_obj *of) {
    object *old = ix_unlink(ds, key, keylen);
    object *o = objtable_insert_room(ds->ix, key, keylen, sizeof(rec), NULL);
    tag_add(ds, o);
    o->size = len;
    o->crc = crc;
    objtable_set_state(ds->ix, o, OBJ_COMPLETE);
    *room(o) = (rec){ .off = off, .seq = seq, .hdr = hdr, .of = *of };
    room(o)->of.pieces = of->npieces ? xmemdup(of->pieces, of->npieces * sizeof *of->pieces) : NULL;
    ds->st.objects++;
    return old;
}

/* An unlinked record: freed now, or by its last reader. */
static void rec_drop(disk_store *ds, object *o) {
    pthread_mutex_lock(&ds->mu);
    room(o)->dead = 1;
    int now = o->pins == 0;
    pthread_mutex_unlock(&ds->mu);
    if (now) rec_release(ds, o);
}

/* ---- the scan at open ---- */

typedef struct scan {
    disk_store *ds;
    uint8_t *win;
    uint64_t woff, wlen;
    int err;
} scan;

/* Bytes [off, off+len) of the file (len <= SCAN_BYTES - BLK), or NULL. */
static const uint8_t *scan_at(scan *s, uint64_t off, uint64_t len) {
    if (off >= s->woff && off + len <= s->woff + s->wlen) return s->win + (off - s->woff);
    uint64_t start = off & ~(uint64_t)(BLK - 1);
    uint64_t n = s->ds->size - start < SCAN_BYTES ? s->ds->size - start : SCAN_BYTES;
    if (off + len > start + n) return NULL;
    disk_req r[SCAN_MAX_REQS];
    size_t nr = 0;
    for (uint64_t at = 0; at < n; at += PIECE)
        r[nr++] = (disk_req){ 0, s->win + at, start + at, n - at < PIECE ? n - at : PIECE, NULL, 0 };
    if (disk_io_run(s->ds->io, r, nr) != 0) { s->err = 1; return NULL; }
    s->woff = start;
    s->wlen = n;
    s->ds->st.scan_bytes += n;
    return s->win + (off - start);
}

/* The CRC32C of len bytes from off. */
static int scan_crc(scan *s, uint64_t off, uint64_t len, uint32_t *crc) {
    uint32_t c = 0;
    while (len > 0) {
        uint64_t in = (off >= s->woff && off < s->woff + s->wlen) ? s->woff + s->wlen - off
                                                                   : SCAN_BYTES - (off & (BLK - 1));
        uint64_t n = len < in ? len : in;
        const uint8_t *p = scan_at(s, off, n);
        if (!p) return -1;
        c = crc32c(c, p, n);
        off += n;
        len -= n;
    }
    *crc = c;
    return 0;
}

static void wipe(disk_store *ds, uint64_t off, uint32_t hdr) {
    disk_req z = { 1, ds->zero, off, hdr, NULL, 0 };
    if (disk_io_run(ds->io, &z, 1) != 0) ds->st.io_errors++;
}

/* A record that checked out: kept unless a newer one of its key is. */
static void scan_keep(disk_store *ds, const rec_hdr *h, uint64_t off) {
    object *cur = objtable_find(ds->ix, h->key, h->keylen);
    uint64_t bytes = h->hdr + round_blk(h->len);
    if (cur && room(cur)->seq > h->seq) {
        wipe(ds, off, h->hdr);
        ds->st.dropped++;
        return;
    }
    if (seg_alloc_reserve_at(ds->alloc, off - BLK, bytes) != 0) {   /* cannot happen: scanned in order */
        wipe(ds, off, h->hdr);
        ds->st.dropped++;
        return;
    }
    ds->st.used += bytes;
    object *old = ix_put(ds, h->key, h->keylen, h->len, h->crc, off, h->seq, h->hdr, &h->of);
    if (h->seq >= ds->next_seq) ds->next_seq = h->seq + 1;
    ds->st.recovered++;
    if (old) {
        ds->st.dropped++;
        ds->st.recovered--;
        ds->st.objects--;
        wipe(ds, room(old)->off, room(old)->hdr);
        ds->st.used -= rec_bytes(old);
        seg_alloc_release(ds->alloc, room(old)->off - BLK, rec_bytes(old));
        rec_free(old);
    }
}

/* Every record of the file, in order. A block that does not start a
 * record that checks out is stepped over one block at a time (a damaged
 * record's bytes are not trusted to say where the next one starts). */
static int scan_file(disk_store *ds) {
    scan s = { .ds = ds, .win = ds->stage_mem };
    uint64_t t0 = mono_ms();
    uint8_t key[DISK_MAX_KEY];
    disk_piece *pieces = xmalloc(DISK_MAX_PIECES * sizeof *pieces);   /* the window moves under them too */
    for (uint64_t off = BLK; off + BLK <= ds->size && !s.err;) {
        /* Blocks never written hold no record: a large, little used
         * file is scanned in the time of what it holds. */
        if (off >= s.woff + s.wlen) {
            off = disk_io_next_data(ds->io, off);
            if (off + BLK > ds->size) break;
        }
        const uint8_t *b = scan_at(&s, off, BLK);
        uint32_t hdr;
        rec_hdr h;
        if (!b || !rec_peek(ds, b, off, &hdr)) { off += BLK; continue; }
        b = scan_at(&s, off, hdr);
        if (!b || !rec_parse(ds, b, off, hdr, &h, pieces)) { off += BLK; continue; }
        memcpy(key, h.key, h.keylen);   /* the window moves under the value */
        h.key = key;
        uint32_t crc;
        if (scan_crc(&s, off + hdr, h.len, &crc) != 0) break;
        if (crc != h.crc) {
            log_warning("disk: %s: the record at %llu (key of %u bytes, %llu bytes) fails its CRC32C: dropped",
                        ds->path, (unsigned long long)off, h.keylen, (unsigned long long)h.len);
            wipe(ds, off, hdr);
            ds->st.dropped++;
            off += BLK;
            continue;
        }
        scan_keep(ds, &h, off);
        off += hdr + round_blk(h.len);
    }
    free(pieces);
    ds->st.scan_ms = mono_ms() - t0;
    return s.err ? -1 : 0;
}

/* ---- open ---- */

static int mkdirs(const char *dir) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/') continue;
        *c = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST) return -1;
        *c = '/';
    }
    return mkdir(p, 0700) != 0 && errno != EEXIST ? -1 : 0;
}

/* The file's header: 1 if it is ours (file_id taken from it), 0 if the
 * file is new or its header is not one (it starts empty), -1 refused. */
static int check_header(disk_store *ds, char *err, size_t errlen) {
    uint8_t *h = ds->stage[0];
    disk_req r = { 0, h, 0, BLK, NULL, 0 };
    if (disk_io_run(ds->io, &r, 1) != 0) {
        snprintf(err, errlen, "cannot read %s", ds->path);
        return -1;
    }
    if (memcmp(h, FILE_MAGIC, 8) != 0) return 0;
    if (le_get32(h + BLK - 4) != crc32c(0, h, BLK - 4)) {
        log_warning("disk: %s: its header fails its CRC32C: the file starts empty", ds->path);
        return 0;
    }
    if (le_get32(h + 8) != FILE_VERSION || le_get32(h + 12) != BLK) {
        snprintf(err, errlen, "%s is of another version of moonkv; remove it to start empty", ds->path);
        return -1;
    }
    if (le_get64(h + 16) != ds->size) {
        snprintf(err, errlen, "%s holds %llu bytes, this node's --disk-size is %llu; remove it to start empty",
                 ds->path, (unsigned long long)le_get64(h + 16), (unsigned long long)ds->size);
        return -1;
    }
    if (le_get64(h + 32) != ds->tag) {
        snprintf(err, errlen, "%s belongs to another cluster (name or secret); remove it to start empty", ds->path);
        return -1;
    }
    ds->file_id = le_get64(h + 24);
    return 1;
}

static int fresh(disk_store *ds) {
    do
        if (random_bytes(&ds->file_id, sizeof ds->file_id) != 0) ds->file_id = mono_us() ^ (uint64_t)getpid();
    while (ds->file_id == 0);
    file_header(ds, ds->stage[0]);
    disk_req w = { 1, ds->stage[0], 0, BLK, NULL, 0 };
    return disk_io_run(ds->io, &w, 1);
}

static disk_store *ds_new(const disk_store_config *c) {
    disk_store *ds = xcalloc(1, sizeof *ds);
    snprintf(ds->path, sizeof ds->path, "%s/%s", c->dir, c->name);
    ds->size = c->size & ~(uint64_t)(BLK - 1);
    ds->tag = c->tag;
    ds->prefixed = c->prefixed;
    ds->next_seq = 1;
    pthread_mutex_init(&ds->mu, NULL);
    pthread_mutex_init(&ds->smu, NULL);
    pthread_cond_init(&ds->scv, NULL);
    ds->ix = objtable_create(ix_free_fn, NULL);
    ds->bytag = objtable_create(tag_free_fn, NULL);
    ds->stage_mem = aligned(SCAN_BYTES);
    for (int i = 0; i < DISK_STAGE_SLOTS && ds->stage_mem; i++) ds->stage[i] = ds->stage_mem + i * DISK_STAGE_BYTES;
    ds->zero = aligned(MAX_HDR);
    return ds;
}

disk_store *disk_store_open(const disk_store_config *c, char *err, size_t errlen) {
    if (c->size < DISK_MIN_SIZE) {
        snprintf(err, errlen, "--disk-size must be at least %llu bytes", (unsigned long long)DISK_MIN_SIZE);
        return NULL;
    }
    if (mkdirs(c->dir) != 0) {
        snprintf(err, errlen, "cannot make %s: %s", c->dir, strerror(errno));
        return NULL;
    }
    disk_store *ds = ds_new(c);
    ds->alloc = seg_alloc_create_untracked(ds->size - BLK, BLK);
    for (int i = 0; i < DISK_STAGE_SLOTS; i++)
        if (!ds->stage[i]) goto nomem;
    if (!ds->zero || !ds->alloc) goto nomem;
    ds->io = disk_io_open(ds->path, ds->size, c->io, err, errlen);
    if (!ds->io) goto fail;
    int ours = check_header(ds, err, errlen);
    if (ours < 0) goto fail;
    if (ours == 0 && fresh(ds) != 0) {
        snprintf(err, errlen, "cannot write %s", ds->path);
        goto fail;
    }
    if (ours == 1 && scan_file(ds) != 0) {
        snprintf(err, errlen, "cannot read %s", ds->path);
        goto fail;
    }
    ds->st.capacity = ds->size - BLK;
    log_notice("disk: %s, %llu MB, %s%s I/O, %llu objects back (%llu dropped) in %llu ms", ds->path,
               (unsigned long long)(ds->size >> 20), disk_io_name(ds->io), disk_io_direct(ds->io) ? " O_DIRECT" : "",
               (unsigned long long)ds->st.recovered, (unsigned long long)ds->st.dropped,
               (unsigned long long)ds->st.scan_ms);
    return ds;
nomem:
    snprintf(err, errlen, "out of memory for the disk tier's staging");
    errno = ENOMEM;
fail:;
    int e = errno;
    disk_store_close(ds, 0);
    errno = e;
    return NULL;
}

/* ---- put, read, remove ---- */

static int is_aligned(const void *p) { return ((uintptr_t)p & (BLK - 1)) == 0; }

/* The value's whole blocks at off straight from/into buf, as PIECE
 * requests into r (at most max); how many. */
static size_t direct_reqs(disk_req *r, size_t max, int write, void *buf, uint64_t off, uint64_t whole) {
    size_t n = 0;
    for (uint64_t at = 0; at < whole && n < max; at += PIECE)
        r[n++] = (disk_req){ write, (uint8_t *)buf + at, off + at, whole - at < PIECE ? whole - at : PIECE,
                             NULL, 0 };
    return n;
}

#define MAX_REQS 64

/* A value's CRC32C, computed while its write is in flight. */
typedef struct sum_job {
    const void *val;
    uint64_t len;
    uint32_t crc;
    int done;
} sum_job;

static void sum_meanwhile(void *ctx) {
    sum_job *j = ctx;
    j->crc = crc32c(0, j->val, j->len);
    j->done = 1;
}

/* Header and value: an aligned value straight from the caller's buffer
 * (its tail through the slot), any other through the slot in
 * DISK_STAGE_BYTES batches, the header in the first. *crc (when asked):
 * the value's CRC32C as written, computed while the writes fly, or in
 * the copy into the slot (no pass of its own). */
static int write_value(disk_store *ds, uint8_t *slot, uint32_t hdr, uint64_t off, const void *val, uint64_t len,
                       uint32_t *crc) {
    disk_req r[MAX_REQS];
    uint64_t whole = len & ~(uint64_t)(BLK - 1);
    if (is_aligned(val) && whole / PIECE < MAX_REQS - 2) {
        /* The header and the value's first piece are one request (a
         * writev): a separate 4 KiB write per record was a second disk
         * operation per value, half the operations for 1 MiB values. */
        size_t n = direct_reqs(r, MAX_REQS - 2, 1, (void *)val, off + hdr, whole);
        struct iovec head[2] = { { slot, hdr }, { (void *)val, n ? r[0].len : 0 } };
        disk_req first = { 1, NULL, off, hdr + head[1].iov_len, head, n ? 2 : 1 };
        if (n) r[0] = first;
        else r[n++] = first;
        if (len > whole) {
            memset(slot + hdr, 0, BLK);
            memcpy(slot + hdr, (const uint8_t *)val + whole, len - whole);
            r[n++] = (disk_req){ 1, slot + hdr, off + hdr + whole, BLK, NULL, 0 };
        }
        sum_job sj = { val, len, 0, 0 };
        disk_io_hooks h = { sum_meanwhile, NULL, &sj };
        int rc = disk_io_run_hooked(ds->io, r, n, crc ? &h : NULL);
        if (crc && !sj.done) sum_meanwhile(&sj);   /* the ring gave up before submitting */
        if (crc) *crc = sj.crc;
        return rc;
    }
    uint64_t done = 0, head = hdr;   /* the first batch carries the header */
    uint32_t c = 0;
    do {
        uint64_t n = len - done < DISK_STAGE_BYTES - head ? len - done : DISK_STAGE_BYTES - head;
        if (n && crc) c = crc32c_copy(c, slot + head, (const uint8_t *)val + done, n);
        else if (n) memcpy(slot + head, (const uint8_t *)val + done, n);
        uint64_t io = round_blk(head + n);
        memset(slot + head + n, 0, io - head - n);
        size_t nr = direct_reqs(r, MAX_REQS, 1, slot, off + done + (done ? hdr : 0), io);
        int rc = disk_io_run(ds->io, r, nr);
        if (rc != 0) return rc;
        done += n;
        head = 0;
    } while (done < len);
    if (crc) *crc = c;
    return 0;
}

/* verify: the value's CRC32C must be crc (checked as it is written; a
 * record that fails is wiped as a failed write is, -EBADMSG). */
static int put_rec(disk_store *ds, const void *key, size_t keylen, const void *val, uint64_t len, uint32_t crc,
                   const disk_obj *of, int verify) {
    if (keylen == 0 || keylen > DISK_MAX_KEY) return -EINVAL;
    uint32_t hdr = hdr_bytes(keylen, is_share(len, crc, of), of->npieces);
    uint64_t bytes = len > ds->size ? UINT64_MAX : hdr + round_blk(len), off;
    pthread_mutex_lock(&ds->mu);
    if (bytes == UINT64_MAX || seg_alloc_reserve(ds->alloc, bytes, &off) != ALLOC_OK) {
        ds->st.nospace++;
        pthread_mutex_unlock(&ds->mu);
        return -ENOSPC;
    }
    off += BLK;
    ds->st.used += bytes;
    uint64_t seq = ds->next_seq++;
    pthread_mutex_unlock(&ds->mu);

    uint64_t t0 = mono_us();
    int slot = stage_take(ds);
    rec_header(ds, ds->stage[slot], hdr, key, keylen, seq, len, crc, of);
    uint32_t got = crc;
    int rc = write_value(ds, ds->stage[slot], hdr, off, val, len, verify ? &got : NULL);
    int bad = rc == 0 && got != crc;
    if (bad) rc = -EBADMSG;
    stage_give(ds, slot);
    uint64_t us = mono_us() - t0;

    pthread_mutex_lock(&ds->mu);
    object *old = NULL;
    if (rc == 0) {
        old = ix_put(ds, key, keylen, len, crc, off, seq, hdr, of);
        ds->st.writes++;
        ds->st.write_bytes += len;
        ds->st.write_us += us;
    } else if (!bad) {
        ds->st.io_errors++;
    }
    pthread_mutex_unlock(&ds->mu);
    if (rc != 0) {
        /* Its header may be on the disk: wiped before the space is reused. */
        wipe(ds, off, hdr);
        pthread_mutex_lock(&ds->mu);
        seg_alloc_release(ds->alloc, off - BLK, bytes);
        ds->st.used -= bytes;
        pthread_mutex_unlock(&ds->mu);
        return rc;
    }
    if (old) rec_drop(ds, old);
    return 0;
}

int disk_store_put(disk_store *ds, const void *key, size_t keylen, const void *val, uint64_t len, uint32_t crc) {
    return put_rec(ds, key, keylen, val, len, crc, &(disk_obj){len, crc, 0, NULL}, 1);
}

int disk_store_put_share(disk_store *ds, const void *key, size_t keylen, const void *val, uint64_t len,
                         const disk_obj *of) {
    if (len > of->size || !pieces_ok(of->pieces, of->npieces, len, of->size)) return -EINVAL;
    return put_rec(ds, key, keylen, val, len, crc32c(0, val, len), of, 0);
}

int disk_store_stat(disk_store *ds, const void *key, size_t keylen, uint64_t *len, uint32_t *crc, disk_obj *of) {
    pthread_mutex_lock(&ds->mu);
    object *o = objtable_find(ds->ix, key, keylen);
    if (o) {
        *len = o->size;
        *crc = o->crc;
        if (of) *of = room(o)->of, of->pieces = NULL;   /* the record's, freed with it */
    }
    pthread_mutex_unlock(&ds->mu);
    return o ? 0 : -ENOENT;
}

/* A read in pieces, each summed as it lands while the rest fly. */
typedef struct sum_pieces {
    const disk_req *r;
    uint32_t crc[MAX_REQS];
} sum_pieces;

static void sum_landed(void *ctx, size_t i) {
    sum_pieces *p = ctx;
    p->crc[i] = crc32c(0, p->r[i].buf, p->r[i].len);
}

/* Requests of whole bytes at off into buf: about four, so that all but
 * the last one's CRC pass overlaps the disk (READ_PIECE_MIN at least,
 * PIECE at most). */
#define READ_PIECE_MIN (256u << 10)
static size_t read_reqs(disk_req *r, size_t max, void *buf, uint64_t off, uint64_t whole) {
    uint64_t piece = round_blk(whole / 4);
    piece = piece < READ_PIECE_MIN ? READ_PIECE_MIN : piece > PIECE ? PIECE : piece;
    size_t n = 0;
    for (uint64_t at = 0; at < whole && n < max; at += piece)
        r[n++] = (disk_req){ 0, (uint8_t *)buf + at, off + at, whole - at < piece ? whole - at : piece, NULL, 0 };
    return n;
}

/* The value at off into buf: its whole blocks straight when buf is
 * aligned (each piece summed as it lands), the rest through the slot.
 * Its CRC32C in *crc. */
static int read_value(disk_store *ds, uint8_t *slot, uint64_t off, void *buf, uint64_t len, uint32_t *crc) {
    disk_req r[MAX_REQS];
    uint64_t whole = len & ~(uint64_t)(BLK - 1);
    if (is_aligned(buf) && whole / PIECE < MAX_REQS - 1) {
        size_t n = read_reqs(r, MAX_REQS - 1, buf, off, whole), pieces = n;
        if (len > whole) r[n++] = (disk_req){ 0, slot, off + whole, BLK, NULL, 0 };
        sum_pieces sp = { r, {0} };
        disk_io_hooks h = { NULL, sum_landed, &sp };
        int rc = disk_io_run_hooked(ds->io, r, pieces, &h);
        if (rc == 0 && n > pieces) rc = disk_io_run(ds->io, r + pieces, 1);
        if (rc != 0) return rc;
        uint32_t c = pieces ? sp.crc[0] : 0;
        for (size_t i = 1; i < pieces; i++) c = crc32c_combine(c, sp.crc[i], r[i].len);
        *crc = len > whole ? crc32c_copy(c, (uint8_t *)buf + whole, slot, len - whole) : c;
        return 0;
    }
    uint32_t c = 0;
    for (uint64_t done = 0; done < len;) {
        uint64_t n = len - done < DISK_STAGE_BYTES ? len - done : DISK_STAGE_BYTES;
        size_t nr = direct_reqs(r, MAX_REQS, 0, slot, off + done, round_blk(n));
        int rc = disk_io_run(ds->io, r, nr);
        if (rc != 0) return rc;
        c = crc32c_copy(c, (uint8_t *)buf + done, slot, n);
        done += n;
    }
    *crc = c;
    return 0;
}

static void read_end(disk_store *ds, object *o, int rc, int bad, uint64_t bytes, uint64_t us);

int disk_store_read(disk_store *ds, const void *key, size_t keylen, void *buf, uint64_t cap, uint64_t *len) {
    pthread_mutex_lock(&ds->mu);
    object *o = objtable_find(ds->ix, key, keylen);
    if (!o) {
        pthread_mutex_unlock(&ds->mu);
        return -ENOENT;
    }
    *len = o->size;
    if (o->size > cap) {
        pthread_mutex_unlock(&ds->mu);
        return -ENOBUFS;
    }
    o->pins++;
    uint64_t off = room(o)->off + room(o)->hdr, size = o->size;
    uint32_t want = o->crc;
    pthread_mutex_unlock(&ds->mu);

    uint64_t t0 = mono_us();
    /* An aligned buffer of whole blocks needs no slot (readers need not wait for one). */
    int slot = is_aligned(buf) && size % BLK == 0 && size / PIECE < MAX_REQS - 1 ? -1 : stage_take(ds);
    uint32_t crc = 0;
    int rc = read_value(ds, slot >= 0 ? ds->stage[slot] : NULL, off, buf, size, &crc);
    if (slot >= 0) stage_give(ds, slot);
    int bad = rc == 0 && crc != want;
    read_end(ds, o, rc, bad, size, mono_us() - t0);
    if (rc != 0) return rc;
    return bad ? -EBADMSG : 0;
}

/* A read of o (pinned) ended, bytes of its value read: counted, o
 * unpinned, and dropped if its bytes failed their CRC (bad) or freed if
 * it was dropped meanwhile. */
static void read_end(disk_store *ds, object *o, int rc, int bad, uint64_t bytes, uint64_t us) {
    pthread_mutex_lock(&ds->mu);
    o->pins--;
    int unlinked = 0;
    if (rc != 0 && !bad) ds->st.io_errors++;
    else if (bad) ds->st.checksum_errors++;
    else {
        ds->st.reads++;
        ds->st.read_bytes += bytes;
        ds->st.read_us += us;
    }
    if (bad && !room(o)->dead && objtable_find(ds->ix, o->key, o->keylen) == o) {
        ix_unlink(ds, o->key, o->keylen);
        unlinked = 1;
        if (ds->nrotten < DISK_ROTTEN_MAX) {   /* beyond: the master finds out when it reads one */
            disk_key *k = &ds->rotten[ds->nrotten++];
            k->key = xmemdup(o->key, o->keylen);
            k->keylen = o->keylen;
        }
    }
    int free_now = (room(o)->dead || unlinked) && o->pins == 0;
    if (unlinked) room(o)->dead = 1;
    uint64_t size = o->size, off = room(o)->off;
    pthread_mutex_unlock(&ds->mu);
    if (bad) log_warning("disk: %s: a value of %llu bytes at %llu fails its CRC32C: dropped", ds->path,
                         (unsigned long long)size, (unsigned long long)off);
    if (free_now) rec_release(ds, o);
}

/* The record of key tag tag, whole, of size bytes and CRC crc, pinned
 * (NULL: none such; a share is never served whole). */
static object *pin_tagged(disk_store *ds, uint64_t tag, uint64_t size, uint32_t crc) {
    uint8_t k[8];
    le_put64(k, tag);
    pthread_mutex_lock(&ds->mu);
    object *t = objtable_find(ds->bytag, k, sizeof k), *o = t ? ((tagged *)objtable_room(t))->o : NULL;
    if (o && (room(o)->dead || o->size != size || o->crc != crc || room(o)->of.size != size)) o = NULL;
    if (o) o->pins++;
    pthread_mutex_unlock(&ds->mu);
    return o;
}

int disk_store_read_tagged(disk_store *ds, uint64_t tag, uint64_t size, uint32_t crc, uint64_t from, uint64_t to,
                           disk_store_put_fn *put, void *ctx) {
    object *o = size && from < to && to <= size ? pin_tagged(ds, tag, size, crc) : NULL;
    if (!o) return -ENOENT;
    int whole = from == 0 && to == size, slot = stage_take(ds), rc = 0;
    uint64_t off = room(o)->off + room(o)->hdr, t0 = mono_us(), done = from & ~(uint64_t)(BLK - 1), n = 0, at = 0;
    uint8_t *buf = ds->stage[slot];
    uint32_t c = 0;
    while (rc == 0 && done < to) {
        n = to - done < DISK_STAGE_BYTES ? to - done : DISK_STAGE_BYTES;
        disk_req r[MAX_REQS];
        rc = disk_io_run(ds->io, r, read_reqs(r, MAX_REQS, buf, off + done, round_blk(n)));
        if (rc != 0) break;
        if (whole) c = crc32c(c, buf, (size_t)n);
        at = done;
        done += n;
        if (done < to && put(ctx, at, buf, (size_t)n) != 0) rc = -EPIPE;
    }
    int bad = whole && rc == 0 && c != crc;   /* the whole's last piece is held until it proved */
    if (rc == 0 && !bad && put(ctx, at, buf, (size_t)n) != 0) rc = -EPIPE;
    stage_give(ds, slot);
    read_end(ds, o, rc == -EPIPE ? 0 : rc, bad, done - (from & ~(uint64_t)(BLK - 1)), mono_us() - t0);
    if (rc != 0) return rc;
    return bad ? -EBADMSG : 0;
}

int disk_store_remove(disk_store *ds, const void *key, size_t keylen) {
    pthread_mutex_lock(&ds->mu);
    object *o = ix_unlink(ds, key, keylen);
    if (o) ds->st.removes++;
    pthread_mutex_unlock(&ds->mu);
    if (!o) return -ENOENT;
    rec_drop(ds, o);
    return 0;
}

/* ---- the rest ---- */

typedef struct walk_ctx {
    disk_store_fn *fn;
    void *ctx;
    size_t handed;
} walk_ctx;

static void walk_one(object *o, void *ctx) {
    walk_ctx *w = ctx;
    w->fn(w->ctx, o->key, o->keylen, o->size, o->crc, &room(o)->of);
    w->handed++;
}

uint64_t disk_store_scan(disk_store *ds, uint64_t cursor, size_t max, disk_store_fn *fn, void *ctx) {
    walk_ctx w = { fn, ctx, 0 };
    pthread_mutex_lock(&ds->mu);
    do cursor = objtable_scan(ds->ix, cursor, walk_one, &w);
    while (cursor != 0 && w.handed < max);
    pthread_mutex_unlock(&ds->mu);
    return cursor;
}

void disk_store_walk(disk_store *ds, disk_store_fn *fn, void *ctx) {
    (void)disk_store_scan(ds, 0, SIZE_MAX, fn, ctx);
}

size_t disk_store_take_rotten(disk_store *ds, const void *prefix, size_t plen, disk_key *out, size_t max) {
    pthread_mutex_lock(&ds->mu);
    size_t n = 0, kept = 0;
    for (size_t i = 0; i < ds->nrotten; i++) {
        disk_key k = ds->rotten[i];
        if (n < max && k.keylen >= plen && (plen == 0 || memcmp(k.key, prefix, plen) == 0)) out[n++] = k;
        else ds->rotten[kept++] = k;   /* another's, or past max: stays, in order */
    }
    ds->nrotten = kept;
    pthread_mutex_unlock(&ds->mu);
    return n;
}

void disk_store_get_stats(disk_store *ds, disk_store_stats *st) {
    pthread_mutex_lock(&ds->mu);
    *st = ds->st;
    pthread_mutex_unlock(&ds->mu);
}

const char *disk_store_io_name(const disk_store *ds) { return disk_io_name(ds->io); }
const char *disk_store_path(const disk_store *ds) { return ds->path; }

void disk_store_close(disk_store *ds, int remove) {
    if (!ds) return;
    disk_io_close(ds->io);
    if (remove) unlink(ds->path);
    for (size_t i = 0; i < ds->nrotten; i++) free(ds->rotten[i].key);
    objtable_destroy(ds->bytag);
    objtable_destroy(ds->ix);
    if (ds->alloc) seg_alloc_destroy(ds->alloc);
    free(ds->stage_mem);
    free(ds->zero);
    pthread_cond_destroy(&ds->scv);
    pthread_mutex_destroy(&ds->smu);
    pthread_mutex_destroy(&ds->mu);
    free(ds);
}
