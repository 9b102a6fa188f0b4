/* node/disk_store.h - a node's disk tier: whole objects in one preallocated file.
 *
 * The file (DIR/NAME, --disk-dir) is allocated whole when it is made, so
 * a disk that fills up later cannot fail a write half way. Its first
 * 4 KiB block is the file's header: magic, version, size, a random file
 * id (new each time the file starts empty) and the owner's tag (a hash of
 * the cluster's name and secret: another cluster's file is refused), with
 * a CRC32C. Records follow, each at a 4 KiB-aligned extent from an
 * allocator (core/alloc.h):
 *
 *   header  magic | file id | sequence | value length | value CRC32C |
 *           key length | object CRC32C | share flag | pieces (u16) |
 *           1 reserved | key | (a share: object size | pieces x
 *           (object offset, length)) | ... | header CRC32C (last 4 bytes)
 *           (4 KiB; more for long keys or many pieces)
 *   value   padded to 4 KiB
 *
 * Header and value go out in one batch; nothing else marks a record
 * complete. At open the file is scanned and every record whose header
 * and value check out is indexed (a key found twice keeps the higher
 * sequence); a torn or damaged record is dropped (its header zeroed),
 * never half-trusted. The file id in every header means bytes a client
 * stored cannot pass for a record. A removed record's header is zeroed
 * before its space is reused. Reads check the value's CRC32C; a mismatch
 * drops the record and counts a checksum error.
 *
 * I/O through disk_io.h: aligned buffers go to the disk straight, others
 * through a bounded staging area (DISK_STAGE_SLOTS buffers of
 * DISK_STAGE_BYTES). Thread-safe. */
#ifndef MKV_NODE_DISK_STORE_H
#define MKV_NODE_DISK_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "node/disk_io.h"

#define DISK_STAGE_SLOTS 4
#define DISK_STAGE_BYTES (4u << 20)
#define DISK_MIN_SIZE (1ull << 20)
/* A record's key: a protocol key (4096 bytes) and room for a prefix of
 * the caller's (disk_tier.h: a node shared by master groups). */
#define DISK_MAX_KEY (4096 + 64)

typedef struct disk_store disk_store;

typedef struct disk_store_config {
    const char *dir;       /* made if missing */
    const char *name;      /* the file in it */
    uint64_t size;         /* bytes of the file (rounded down to 4 KiB) */
    disk_io_kind io;
    uint64_t tag;          /* the owner's: a file with another is refused */
    int prefixed;          /* keys carry a prefix up to their first NUL (disk_tier.h): a key's
                              te_cap_disk_tag is of what follows it */
} disk_store_config;

typedef struct disk_store_stats {
    uint64_t capacity, used, objects;
    uint64_t writes, write_bytes, write_us;   /* records written, their value bytes, time */
    uint64_t reads, read_bytes, read_us;
    uint64_t removes, nospace, io_errors;
    uint64_t checksum_errors;                 /* values that failed their CRC on a read */
    uint64_t recovered, dropped;              /* at open: records kept, records dropped */
    uint64_t scan_ms, scan_bytes;
} disk_store_stats;

/* One piece of a share: object bytes [off, off+len); the record holds
 * its pieces one after another, in object order. */
typedef struct disk_piece {
    uint64_t off, len;
} disk_piece;
#define DISK_MAX_PIECES 4096   /* of one share (a replica's extents, PROTO_MAX_EXTENTS) */

/* What a record holds: the object whole (size the value's length, crc
 * its CRC32C), or a node's share of an object striped over nodes (its
 * slices on that node, in object order; docs/SSD_TIER.md): the object's
 * size and CRC32C, the value shorter, and where in the object each of
 * its pieces lies (so a master that lost its table can put the object
 * together again from every node's shares). A share written before
 * pieces were kept has none (npieces 0). */
typedef struct disk_obj {
    uint64_t size;
    uint32_t crc;
    uint32_t npieces;
    const disk_piece *pieces;   /* put_share's, a walk's (valid in its callback); NULL from stat */
} disk_obj;

/* Opens the file (making it and its directory when missing) and indexes
 * its records. NULL with why in err: refused (another owner or size, in
 * use), or no room to make it (errno ENOSPC or EFBIG then). */
disk_store *disk_store_open(const disk_store_config *c, char *err, size_t errlen);

/* Writes key's value (len bytes whose CRC32C the caller says is crc) and
 * indexes it once written whole; a record of key already there is
 * replaced. 0; -ENOSPC: no extent that large free; -EBADMSG: the bytes
 * do not match crc (nothing kept); -errno of a failed write. */
int disk_store_put(disk_store *ds, const void *key, size_t keylen, const void *val, uint64_t len, uint32_t crc);
/* The same for a share of the object of: the value's CRC32C is computed
 * here (nothing to check it against; the object's reader checks the
 * whole), of kept beside it. of's pieces (if any) must tile the value
 * in object order, inside the object: else -EINVAL. */
int disk_store_put_share(disk_store *ds, const void *key, size_t keylen, const void *val, uint64_t len,
                         const disk_obj *of);
/* 0 and the value's length and CRC (and, of non-NULL, what it is of), or -ENOENT. */
int disk_store_stat(disk_store *ds, const void *key, size_t keylen, uint64_t *len, uint32_t *crc, disk_obj *of);
/* Reads key's value into buf (cap bytes): 0 and *len; -ENOENT; -ENOBUFS
 * (cap too small, *len says how much); -EBADMSG: the bytes failed their
 * CRC (the record is dropped); -errno of a failed read. */
int disk_store_read(disk_store *ds, const void *key, size_t keylen, void *buf, uint64_t cap, uint64_t *len);
/* Reads the record of the key whose te_cap_disk_tag (backend/cap.h) is
 * tag, if it holds a whole object of size bytes and CRC32C crc, through
 * a staging slot, handing put its value's bytes [from, to) (from aligned
 * down to a block) in pieces (in order, up to DISK_STAGE_BYTES each, at
 * their offset in the value). The whole value (from 0 to size): the
 * last piece only once its CRC32C matched crc; a part is not proved
 * here (its reader checks its slice CRCs). 0; -ENOENT (no such record);
 * -EBADMSG (it failed its CRC: dropped, as disk_store_read drops it);
 * -EPIPE (put failed); -errno of a failed read. Two keys of one tag are
 * never served by it. */
typedef int disk_store_put_fn(void *ctx, uint64_t at, const void *buf, size_t n);
int disk_store_read_tagged(disk_store *ds, uint64_t tag, uint64_t size, uint32_t crc, uint64_t from, uint64_t to,
                           disk_store_put_fn *put, void *ctx);
/* 0, or -ENOENT. The space is reused once reads in flight finished. */
int disk_store_remove(disk_store *ds, const void *key, size_t keylen);

/* Every record to fn (under the store's lock: fn must not call back). */
typedef void disk_store_fn(void *ctx, const void *key, size_t keylen, uint64_t len, uint32_t crc,
                           const disk_obj *of);
void disk_store_walk(disk_store *ds, disk_store_fn *fn, void *ctx);
/* The same in steps (a SCAN cursor: 0 to start; returns the next, 0 at
 * the end): at least max records (unless the walk ends), a few more when
 * a step of the index hands them together. Every record present for the
 * whole walk is handed at least once, whatever changes between steps. */
uint64_t disk_store_scan(disk_store *ds, uint64_t cursor, size_t max, disk_store_fn *fn, void *ctx);

/* Keys of records a read found rotten and dropped (-EBADMSG), oldest
 * first, those starting with prefix (plen 0: all), up to max into out
 * (each key the caller's to free); the store keeps DISK_ROTTEN_MAX until
 * taken. For MOON.BADREPLICA. */
#define DISK_ROTTEN_MAX 256
typedef struct disk_key {
    char *key;
    size_t keylen;
} disk_key;
size_t disk_store_take_rotten(disk_store *ds, const void *prefix, size_t plen, disk_key *out, size_t max);

void disk_store_get_stats(disk_store *ds, disk_store_stats *st);
const char *disk_store_io_name(const disk_store *ds);
const char *disk_store_path(const disk_store *ds);
/* remove: the file is deleted (the node left the cluster). */
void disk_store_close(disk_store *ds, int remove);

#endif
