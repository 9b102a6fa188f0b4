/* proto/slots.h - the key space cut into hash slots over master groups.
 *
 * A key's slot is Redis Cluster's: CRC16 (XMODEM: poly 0x1021, init 0)
 * of the key, or of the part between the first '{' and the next '}' when
 * that part is not empty (a hash tag keeps related keys in one group),
 * modulo PROTO_SLOTS. The slot map says which master group owns each
 * slot; it lives in etcd as text (etcd/slotmap.h), with a version that
 * every change raises:
 *
 *     <version> <first>-<last>=<group> [<first>-<last>=<group> ...]
 *
 * ranges in any order, not overlapping; a slot no range names has no
 * group. A slot being moved reads "<first>-<last>=<group><<from>": group
 * owns it (clients route to it) and from still holds some of its
 * objects, which group adopts by their metadata (master/migrate.h) before
 * it clears the mark. A group id is 1 to PROTO_GROUP_LEN - 1 bytes of [A-Za-z0-9_-].
 * A master answers a key of a slot it does not own with
 * "-MOVED <slot> <group>" (PROTO_MOVED; the group is "-" when the slot
 * has none), and a client reads the map again. No I/O here. */
#ifndef MKV_PROTO_SLOTS_H
#define MKV_PROTO_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_SLOTS        16384
#define PROTO_MAX_GROUPS   255      /* groups named in one map */
#define PROTO_GROUP_LEN    32       /* a group id's room, its NUL included */
#define PROTO_MAX_RANGES   512      /* ranges in one map's text (its etcd reply stays below ETCD_MAX_REPLY) */
#define PROTO_SLOTMAP_MAX  (PROTO_MAX_RANGES * (12 + PROTO_GROUP_LEN) + 32)   /* its text, at most */

typedef struct proto_slotmap {
    uint64_t version;
    int ngroups;
    char groups[PROTO_MAX_GROUPS][PROTO_GROUP_LEN];
    uint8_t owner[PROTO_SLOTS];     /* index into groups + 1; 0: no group */
    uint8_t from[PROTO_SLOTS];      /* in a move: the group still holding objects (+ 1); 0: none */
} proto_slotmap;

/* The slot of a key (hash tags as Redis Cluster). */
uint16_t proto_key_slot(const void *key, size_t len);
/* CRC16-XMODEM of buf (the slot hash before the modulo). */
uint16_t proto_crc16(const void *buf, size_t len);

/* 1 if s is a valid group id. */
int proto_group_ok(const char *s, size_t len);
/* An empty map of version 0. */
void proto_slotmap_init(proto_slotmap *m);
/* The text into m; -1 with the reason in err if it breaks a rule above. */
int proto_slotmap_parse(const char *text, size_t len, proto_slotmap *m, char *err, size_t errlen);
/* m as text into out (PROTO_SLOTMAP_MAX is room enough): its length, or
 * 0 if it does not fit. */
size_t proto_slotmap_format(const proto_slotmap *m, char *out, size_t cap);
/* The group owning slot, or NULL. */
const char *proto_slotmap_owner(const proto_slotmap *m, uint16_t slot);
/* The index + 1 of group in m, 0 if it owns nothing there. */
int proto_slotmap_group(const proto_slotmap *m, const char *group);
/* Give slots first..last to group (only those without a group when
 * only_free): how many changed; -1 if the group is bad or one too many.
 * The version is not raised here. */
int proto_slotmap_assign(proto_slotmap *m, uint16_t first, uint16_t last, const char *group, int only_free);
/* Move slots first..last to group, each marked as still held by its
 * owner before (slots already group's, without a group, or in a move
 * already are left alone): how many were marked; -1 if the group is bad. */
int proto_slotmap_move(proto_slotmap *m, uint16_t first, uint16_t last, const char *group);
/* The move marks of slots first..last owned by group from group from
 * cleared: how many. */
int proto_slotmap_settle(proto_slotmap *m, uint16_t first, uint16_t last, const char *group, const char *from);
/* How many slots group owns. */
int proto_slotmap_count(const proto_slotmap *m, const char *group);
/* "a-b[,c-d...]" (or "all") into assignments of group in m, as
 * proto_slotmap_assign; -1 with err on a bad list. */
int proto_slotmap_assign_list(proto_slotmap *m, const char *list, const char *group, int only_free,
                              int *changed, char *err, size_t errlen);

/* Where the keys of a MOON.* command lie: argv[first], argv[first +
 * step], ... up to argc. 0 if the verb names keys, -1 if it names none
 * (or only leases given back: MOON.RELEASE, MRELEASE). */
int proto_cmd_key_span(int argc, const char *const *argv, const size_t *lens, int *first, int *step);

/* "<slot> <group>" of a MOVED error (after its word) into buf. */
size_t proto_moved_text(uint16_t slot, const char *group, char *out, size_t cap);
/* A MOVED reply's slot and group ("MOVED 12 b ..."): 0, or -1. */
int proto_moved_parse(const char *msg, size_t len, uint16_t *slot, char *group, size_t groupcap);

#endif
