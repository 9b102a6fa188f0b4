/* master/parked.c - a request parked until the master can answer it
 * (put_wait.c: room; get_wait.c: loads from disk): its items and keys
 * copied out of the command's arguments, which go when it returns, and
 * its client blocked (its later commands wait; the loop does not). */
#include <stdlib.h>
#include <string.h>

#include "core/util.h"
#include "master/master.h"

master_parked *master_park(master_parked **head, client *c, const mm_item *it, size_t n, int form,
                           uint64_t now_ms, uint64_t bound_ms) {
    master_parked *p = xcalloc(1, sizeof *p);
    size_t keybytes = 0;
    for (size_t i = 0; i < n; i++) keybytes += it[i].keylen;
    p->keys = xmalloc(keybytes ? keybytes : 1);
    p->it = xmemdup(it, n * sizeof *it);
    p->stamp = xcalloc(n, sizeof *p->stamp);
    for (size_t i = 0, off = 0; i < n; off += it[i].keylen, i++) {
        memcpy(p->keys + off, it[i].key, it[i].keylen);
        p->it[i].key = p->keys + off;
        if (it[i].status == PROTO_OK) p->stamp[i] = mm_obj_stamp(it[i].obj);
    }
    p->c = c;
    p->n = n;
    p->form = form;
    p->t0_ms = now_ms;
    p->deadline_ms = now_ms + bound_ms;
    master_parked **tail = head;
    while (*tail) tail = &(*tail)->next;
    *tail = p;
    client_block(c);
    return p;
}

void master_parked_free(master_parked *p) {
    free(p->it);
    free(p->stamp);
    free(p->keys);
    free(p);
}

void master_parked_free_all(master_parked **head) {
    while (*head) {
        master_parked *p = *head;
        *head = p->next;
        master_parked_free(p);   /* the clients go with the server */
    }
}

size_t master_parked_count(const master_parked *head) {
    size_t n = 0;
    for (; head; head = head->next) n++;
    return n;
}

uint64_t master_parked_next(const master_parked *head, uint64_t next_ms) {
    for (; head; head = head->next)
        if (head->deadline_ms < next_ms) next_ms = head->deadline_ms;
    return next_ms;
}
