/* server/store.c - what every store shares. */
#include "server/store.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

const char *store_strerror(int code) {
    switch (code) {
    case STORE_OK:       return "ok";
    case STORE_EXISTS:   return "key already exists";
    case STORE_NOSPACE:  return "not enough memory";
    case STORE_NOTFOUND: return "no such key";
    case STORE_TOOBIG:   return "value larger than the store can hold";
    case STORE_ERR:      return "store failure";
    case STORE_REFUSED:  return "refused";
    default:             return "unknown store error";
    }
}

void store_get_inline(store *s, const store_key *keys, size_t n, int flags, store_got *got,
                      store_got_fn *done, void *ctx) {
    (void)flags;   /* every value is held here: none streams */
    for (size_t i = 0; i < n; i++) {
        store_got *g = &got[i];
        g->sl.count = 0;
        g->stream = NULL;
        g->rc = s->ops->get_sliced ? s->ops->get_sliced(s, keys[i].ptr, keys[i].len, &g->data, &g->len, &g->pin, &g->sl)
                                   : s->ops->get(s, keys[i].ptr, keys[i].len, &g->data, &g->len, &g->pin);
        if (g->rc != STORE_OK && g->rc != STORE_NOTFOUND) memcpy(g->errstr, s->errstr, sizeof g->errstr);
    }
    done(ctx);
}

void store_stat_inline(store *s, store_stat *st, store_got_fn *done, void *ctx) {
    st->rc = STORE_OK;
    st->objects = s->ops->count(s);
    st->bytes_used = st->bytes_total = 0;   /* the store's info tells its memory */
    st->evicted = s->ops->evicted ? s->ops->evicted(s) : -1;
    st->errstr[0] = '\0';
    done(ctx);
}

/* A page's keys, gathered from a scan (they point into the store). */
typedef struct key_list {
    store_key *keys;
    size_t n, cap;
} key_list;

static void key_add(const char *key, size_t keylen, void *ctx) {
    key_list *kl = ctx;
    if (kl->n == kl->cap) {
        kl->cap = kl->cap ? kl->cap * 2 : 16;
        kl->keys = xrealloc(kl->keys, kl->cap * sizeof *kl->keys);
    }
    kl->keys[kl->n++] = (store_key){key, keylen};
}

void store_scan_inline(store *s, uint64_t cursor, long count, store_page *pg, store_got_fn *done, void *ctx) {
    key_list kl = {0};
    pg->rc = STORE_OK;
    pg->next = s->ops->scan(s, cursor, count, key_add, &kl);
    pg->keys = kl.keys;
    pg->nkeys = kl.n;
    pg->errstr[0] = '\0';
    done(ctx);   /* may free pg */
    free(kl.keys);
}

/* Keys copied out of a scan: a removal may free the memory they point to. */
typedef struct key_copies {
    char *buf;
    size_t len, cap;
} key_copies;

static void key_copy(const char *key, size_t keylen, void *ctx) {
    key_copies *kc = ctx;
    size_t need = sizeof(size_t) + keylen;
    if (kc->cap - kc->len < need) {
        kc->cap = (kc->cap + need) * 2;
        kc->buf = xrealloc(kc->buf, kc->cap);
    }
    memcpy(kc->buf + kc->len, &keylen, sizeof keylen);
    memcpy(kc->buf + kc->len + sizeof keylen, key, keylen);
    kc->len += need;
}

/* Scan a batch, remove it, until the walk ends (the cursor stays valid as
 * the table shrinks). Keys added meanwhile may survive, as in Redis. */
void store_flush_inline(store *s, store_flushed *f, store_got_fn *done, void *ctx) {
    key_copies kc = {0};
    uint64_t cursor = 0, removed = 0;
    do {
        kc.len = 0;
        cursor = s->ops->scan(s, cursor, 1000, key_copy, &kc);
        for (size_t off = 0; off < kc.len;) {
            size_t keylen;
            memcpy(&keylen, kc.buf + off, sizeof keylen);
            removed += (uint64_t)s->ops->remove(s, kc.buf + off + sizeof keylen, keylen);
            off += sizeof keylen + keylen;
        }
    } while (cursor != 0);
    free(kc.buf);
    *f = (store_flushed){.rc = STORE_OK, .removed = removed};
    done(ctx);
}

/* ---- MOON.PREFIX, PREFIXPIN, UNPIN ---- */

static int pin_inline_run(store *s, store_pinq *q) {
    size_t n = 0;
    int rc = STORE_OK;
    switch (q->kind) {
    case STORE_PQ_PREFIX:
        if (s->ops->prefix) rc = s->ops->prefix(s, q->keys, q->nkeys, &n);
        else
            while (n < q->nkeys && s->ops->exists(s, q->keys[n].ptr, q->keys[n].len)) n++;
        break;
    case STORE_PQ_PREFIXPIN:
        rc = s->ops->prefix_pin(s, q->id, q->ms, q->keys, q->nkeys, &n);
        break;
    default:
        for (size_t i = 0; rc == STORE_OK && i < q->nids; i++) {
            size_t k = 0;
            rc = s->ops->unpin(s, q->ids[i], &k);
            n += k;
        }
        break;
    }
    q->count = n;
    return rc;
}

void store_pin_ask(store *s, store_pinq *q, store_got_fn *done, void *ctx) {
    if (s->ops->pin_async) {
        s->ops->pin_async(s, q, done, ctx);
        return;
    }
    q->errstr[0] = '\0';
    q->rc = pin_inline_run(s, q);
    if (q->rc != STORE_OK) memcpy(q->errstr, s->errstr, sizeof q->errstr);
    done(ctx);
}

int store_keeps_pins(const store *s) { return s->ops->pin_async || s->ops->prefix_pin; }
