/* client/recent.c - the locations of the last objects read, by key.
 *
 * A get of a key read before copies from where it was while MOON.GET is
 * on its way (get.c), and keeps the bytes only if the reply names the
 * same place and their CRC32C is the object's: the copy then costs the
 * get no round trip. Write-once keys make that safe: the bytes at a
 * place the master still gives the key are the key's, for as long as
 * the new lease holds them. A key that lost its slot is only located
 * first again. */
#include <stdlib.h>
#include <string.h>

#include "client/client.h"
#include "core/util.h"

/* Each key has two slots (the two halves of its hash): it takes the
 * empty or less recently kept one, so a few hundred keys read in turn
 * rarely push each other out. A slot holds a pointer: the table stays
 * small while few keys are kept. */
static uint64_t hash_of(const void *key, size_t keylen) {
    uint64_t h = 14695981039346656037ULL;   /* FNV-1a */
    for (size_t i = 0; i < keylen; i++) h = (h ^ ((const uint8_t *)key)[i]) * 1099511628211ULL;
    return h;
}

static mkv_recent **slot(mkv_recent **t, uint64_t h, int which) {
    return &t[(which ? h >> 32 : h & 0xffffffffu) % MKV_RECENT_SLOTS];
}

static int holds(const mkv_recent *r, const void *key, size_t keylen) {
    return r && r->keylen == keylen && memcmp(r->key, key, keylen) == 0;
}

const mkv_placement *mkv_recent_find(const mkv_client *c, const void *key, size_t keylen) {
    if (!c->recent) return NULL;
    uint64_t h = hash_of(key, keylen);
    for (int w = 0; w < 2; w++) {
        const mkv_recent *r = *slot(c->recent, h, w);
        if (holds(r, key, keylen)) return &r->pl;
    }
    return NULL;
}

static void slot_clear(mkv_recent **at) {
    mkv_recent *r = *at;
    if (!r) return;
    free(r->key);
    mkv_placement_free(&r->pl);
    free(r);
    *at = NULL;
}

void mkv_recent_keep(mkv_client *c, const void *key, size_t keylen, mkv_placement *pl) {
    if (!c->recent) c->recent = xcalloc(MKV_RECENT_SLOTS, sizeof *c->recent);
    uint64_t h = hash_of(key, keylen);
    mkv_recent **a = slot(c->recent, h, 0), **b = slot(c->recent, h, 1);
    int take_b = holds(*b, key, keylen) ||
                 (!holds(*a, key, keylen) && (!*b || (*a && (*b)->kept < (*a)->kept)));
    mkv_recent **at = take_b ? b : a;
    slot_clear(at);
    mkv_recent *r = xmalloc(sizeof *r);
    *r = (mkv_recent){.key = xmemdup(key, keylen), .keylen = keylen, .kept = ++c->recent_kept, .pl = *pl};
    memset(pl, 0, sizeof *pl);
    *at = r;
}

static int same_extents(const mkv_replica *a, const mkv_replica *b) {
    if (a->nextents != b->nextents) return 0;
    for (uint32_t i = 0; i < a->nextents; i++) {
        const te_extent *x = &a->extents[i], *y = &b->extents[i];
        if (x->node_id != y->node_id || x->offset != y->offset || x->length != y->length) return 0;
    }
    return 1;
}

int mkv_recent_same(const mkv_placement *was, const mkv_placement *now) {
    if (was->term != now->term || was->size != now->size || was->crc != now->crc ||
        was->nreplicas != now->nreplicas)
        return 0;
    for (uint32_t r = 0; r < was->nreplicas; r++)
        if (!same_extents(&was->replicas[r], &now->replicas[r])) return 0;
    return 1;
}

void mkv_recent_free(mkv_client *c) {
    if (!c->recent) return;
    for (size_t i = 0; i < MKV_RECENT_SLOTS; i++) slot_clear(&c->recent[i]);
    free(c->recent);
    c->recent = NULL;
}
