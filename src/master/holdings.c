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

/* A node that does not pull its notes cannot make us hold more than
 * about two per extent its segment could hold. */
static size_t notes_limit(const mm_node *n) {
    return (size_t)(n->segment_size / MM_ALIGN) * 2 + 65536;
}

static void note_free(mm_note *note) {
    free(note->key);
    mm_replica_clear(&note->rep);
}

void mm_notes_reset(mm_node *n) {
    for (size_t i = 0; i < n->notes_n; i++) note_free(&n->notes[n->notes_head + i]);
    free(n->notes);
    n->notes = NULL;
    n->notes_head = n->notes_n = n->notes_cap = 0;
    n->notes_seq = 0;
    n->notes_overflow = 0;
}

static mm_note *note_push(mm_node *n) {
    if (n->notes_head + n->notes_n == n->notes_cap) {
        if (n->notes_head > 0) {   /* slide the live notes down first */
            memmove(n->notes, n->notes + n->notes_head, n->notes_n * sizeof *n->notes);
            n->notes_head = 0;
        }
        if (n->notes_n == n->notes_cap) {
            n->notes_cap = n->notes_cap ? n->notes_cap * 2 : 64;
            n->notes = xrealloc(n->notes, n->notes_cap * sizeof *n->notes);
        }
    }
    mm_note *note = &n->notes[n->notes_head + n->notes_n++];
    memset(note, 0, sizeof *note);
    return note;
}

/* One note for node id about o and its replica r (which has bytes there). */
static void note_node(master_meta *m, uint32_t id, const object *o, const obj_replica *r, int drop) {
    mm_node *n = mm_node_get(m, id);
    if (!n || n->state == NODE_DEAD || n->notes_overflow) return;
    if (n->notes_n >= notes_limit(n)) {
        log_warning("node %u does not take its holdings: it will be dropped", id);
        mm_notes_reset(n);
        n->notes_overflow = 1;   /* mm_check_nodes fails it */
        return;
    }
    mm_note *note = note_push(n);
    note->drop = drop;
    note->key = xmemdup(o->key, o->keylen);
    note->keylen = o->keylen;
    if (drop) return;
    note->size = o->size;
    note->crc = o->crc;
    note->want = o->owner ? mm_obj_of(o)->want : o->nreplicas;
    note->rep.nextents = r->nextents;
    note->rep.extents = xmemdup(r->extents, r->nextents * sizeof *r->extents);
}

void mm_note_replica(master_meta *m, const object *o, const obj_replica *r, int drop) {
    if (o->state != OBJ_COMPLETE) return;
    for (uint32_t i = 0; i < r->nextents; i++) {
        uint32_t id = r->extents[i].node;
        int seen = 0;   /* one note per node, however many slices it has */
        for (uint32_t k = 0; k < i && !seen; k++) seen = r->extents[k].node == id;
        if (!seen) note_node(m, id, o, r, drop);
    }
}

void mm_note_object(master_meta *m, const object *o, int drop) {
    for (uint32_t i = 0; i < o->nreplicas; i++) mm_note_replica(m, o, &o->replicas[i], drop);
}

void mm_note_drop_key(master_meta *m, uint32_t id, const void *key, size_t keylen) {
    object o = {.key = (char *)key, .keylen = keylen, .state = OBJ_COMPLETE};
    note_node(m, id, &o, NULL, 1);
}

size_t mm_node_holdings(master_meta *m, uint32_t id, uint64_t ack, const mm_note **out, size_t max,
                        uint64_t *next_seq) {
    mm_node *n = mm_node_get(m, id);
    if (!n) {
        *next_seq = 0;
        return 0;
    }
    while (n->notes_n > 0 && n->notes_seq < ack) {   /* the node has these */
        note_free(&n->notes[n->notes_head++]);
        n->notes_n--;
        n->notes_seq++;
    }
    if (n->notes_n == 0) n->notes_head = 0;
    size_t k = n->notes_n < max ? n->notes_n : max;
    for (size_t i = 0; i < k; i++) out[i] = &n->notes[n->notes_head + i];
    *next_seq = n->notes_seq + k;
    return k;
}
