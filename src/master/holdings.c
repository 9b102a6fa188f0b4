/* master/holdings.c - telling each node which objects its bytes belong to.
 *
 * A node's bytes are written by clients straight over the data plane, so
 * only the master knows whose they are. Every change of what a node holds
 * (an object completed, a replica joined by copy, a replica or object
 * dropped) becomes a note in that node's queue, in order; the node pulls
 * them (MOON.HOLDINGS) and keeps its index from them, which it reports
 * to a master that lost its table (rebuild.c). Notes stay queued until
 * the node acknowledges them, so a lost reply costs a resend, not an
 * entry. Pending puts never make a note: a node learns only of objects
 * that are whole. */
#include <stdlib.h>
#include <string.h>

#include "core/log.h"
#include "core/util.h"
#include "master/meta_internal.h"
#include "proto/notes.h"

/* A node that does not pull its notes cannot make us hold more than
 * about two per extent its segment could hold. */
#define NOTES_KEEP (1u << 20)   /* bytes of queue room kept however short the queue */

static size_t notes_limit(const mm_node *n) {
    return (size_t)(n->segment_size / MM_ALIGN) * 2 + 65536;
}

void mm_notes_reset(mm_node *n) {
    resp_buf_free(&n->notes);
    resp_buf_init(&n->notes);
    n->notes_head = n->notes_n = 0;
    n->notes_seq = 0;
    n->notes_overflow = 0;
    n->notes_epoch++;   /* whoever waited for these will not see them acknowledged */
    n->acks_awaited = 0;   /* until its link pulls for this registration */
}

void mm_notes_track(master_meta *m) {
    m->tracking = 1;
    m->track_gen++;
    m->ntouched = 0;
}

/* The command being tracked gave node n a note. */
static void track(master_meta *m, mm_node *n) {
    if (!m->tracking || !n->acks_awaited || n->track_gen == m->track_gen) return;
    n->track_gen = m->track_gen;
    if (m->ntouched == m->captouched) {
        m->captouched = m->captouched ? m->captouched * 2 : 8;
        m->touched = xrealloc(m->touched, m->captouched * sizeof *m->touched);
        m->marks = xrealloc(m->marks, m->captouched * sizeof *m->marks);
    }
    m->touched[m->ntouched++] = n->id;
}

const mm_note_mark *mm_notes_touched(master_meta *m, size_t *n) {
    size_t k = 0;
    for (size_t i = 0; i < m->ntouched; i++) {
        const mm_node *nd = mm_node_get(m, m->touched[i]);
        if (!nd || nd->track_gen != m->track_gen || !nd->notes_n) continue;   /* reset since */
        m->marks[k++] = (mm_note_mark){nd->id, nd->notes_epoch, nd->notes_seq + nd->notes_n};
    }
    m->tracking = 0;
    *n = k;
    return m->marks;
}

/* One note for node id about o and its replica r (which has bytes there):
 * its record is appended to the node's queue, so a note costs no
 * allocation of its own and a pull sends the bytes as they are. */
static void note_node(master_meta *m, uint32_t id, const object *o, const obj_replica *r, int drop) {
    mm_node *n = mm_node_get(m, id);
    if (!n || n->state == NODE_DEAD || n->notes_overflow) return;
    if (n->restore && !drop) mm_restore_noted(m, n, o);   /* held there now, whatever it reported */
    if (n->notes_n >= notes_limit(n)) {
        log_warning("node %u does not take its holdings: it will be dropped", id);
        mm_notes_reset(n);
        n->notes_overflow = 1;   /* mm_check_nodes fails it */
        return;
    }
    uint32_t want = drop ? 0 : mm_obj_of(o)->want;
    const proto_slices *sl = drop ? NULL : mm_obj_slices(o);   /* drop: maybe a key alone (mm_note_drop_key) */
    proto_note_put(&n->notes, drop, o->key, o->keylen, o->size, o->crc, want, r, sl);
    n->notes_n++;
    track(m, n);
}

void mm_note_replica(master_meta *m, const object *o, const obj_replica *r, int drop) {
    if (o->state != OBJ_COMPLETE) return;
    /* A disk replica: the node's index is its segment's, so only drops,
     * of the record (one per node: its share of a striped object). */
    int disk = mm_replica_on_disk(r);
    if (disk && !drop) return;
    for (uint32_t i = 0; i < r->nextents; i++) {
        uint32_t id = r->extents[i].node;
        int seen = 0;   /* one note per node, however many slices it has */
        for (uint32_t k = 0; k < i && !seen; k++) seen = r->extents[k].node == id;
        if (!seen) note_node(m, id, o, r, disk ? PROTO_NOTE_DROP_DISK : drop);
    }
}

void mm_note_object(master_meta *m, const object *o, int drop) {
    obj_reps v;
    const obj_replica *reps = object_reps(o, &v);
    for (uint32_t i = 0; i < o->nreplicas; i++) mm_note_replica(m, o, &reps[i], drop);
}

void mm_note_drop_key(master_meta *m, uint32_t id, const void *key, size_t keylen, int disk) {
    object o = {.key = (char *)key, .keylen = keylen, .state = OBJ_COMPLETE};
    note_node(m, id, &o, NULL, disk ? PROTO_NOTE_DROP_DISK : 1);
}

void mm_note_drop_disk_key(master_meta *m, uint32_t id, const void *key, size_t keylen) {
    obj_extent e = {id, MM_ON_DISK, 0};
    obj_replica r = {1, &e};
    object o = {.key = (char *)key, .keylen = (uint32_t)keylen, .state = OBJ_COMPLETE};
    note_node(m, id, &o, &r, PROTO_NOTE_DROP_DISK);
}

/* Acknowledged records go from the head; the rest moves down once the
 * dead part is the larger, so the queue stays within twice its live bytes. */
static void notes_ack(mm_node *n, uint64_t ack) {
    const uint8_t *base = (const uint8_t *)n->notes.data;
    while (n->notes_n > 0 && n->notes_seq < ack) {   /* the node has these */
        n->notes_head += proto_note_len(base + n->notes_head);
        n->notes_n--;
        n->notes_seq++;
    }
    size_t live = n->notes.len - n->notes_head;
    if (n->notes_head > live) {
        memmove(n->notes.data, n->notes.data + n->notes_head, live);
        n->notes.len = live;
        n->notes_head = 0;
    }
    /* A node that lagged behind a burst of puts grew the queue: once it
     * caught up, the room goes back (it was tens of bytes per object
     * placed meanwhile, as much as the object table's share). */
    if (n->notes.cap > NOTES_KEEP && n->notes.len * 4 < n->notes.cap) {
        size_t cap = n->notes.len * 2 > NOTES_KEEP ? n->notes.len * 2 : NOTES_KEEP;
        n->notes.data = xrealloc(n->notes.data, cap);
        n->notes.cap = cap;
    }
}

void mm_node_holdings_ack(master_meta *m, uint32_t id, uint64_t ack) {
    mm_node *n = mm_node_get(m, id);
    if (n) notes_ack(n, ack);
}

size_t mm_node_holdings(master_meta *m, uint32_t id, uint64_t ack, size_t max, size_t max_bytes,
                        const uint8_t **recs, size_t *len, uint64_t *next_seq) {
    mm_node *n = mm_node_get(m, id);
    *recs = NULL;
    *len = 0;
    if (!n) {
        *next_seq = 0;
        return 0;
    }
    notes_ack(n, ack);
    const uint8_t *at = (const uint8_t *)n->notes.data + n->notes_head;
    size_t k = 0, bytes = 0;
    for (; k < n->notes_n && k < max && bytes < max_bytes; k++) bytes += proto_note_len(at + bytes);
    *recs = at;
    *len = bytes;
    *next_seq = n->notes_seq + k;
    return k;
}
