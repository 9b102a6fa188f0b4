/* backend/shares.c - see shares.h. */
#include "backend/shares.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

typedef struct share_group {
    uint8_t key[TE_CAP_KEY_LEN];
    uint64_t term;                 /* 0: not registered */
} share_group;

typedef struct lent_range {
    uint64_t off, len;
    int g;
} lent_range;

/* One group's events for its master (a queue: [head, n) live). */
typedef struct lent_queue {
    te_lent_event *ev;
    size_t head, n, cap;
    uint64_t gen;                  /* raised when the queue is made anew */
} lent_queue;

struct te_shares {
    pthread_mutex_t mu;
    uint64_t size, chunk;
    uint32_t n;
    int8_t *owner;                 /* per chunk: the group, -1 free */
    share_group g[TE_MAX_SHARES];
    lent_range *lent;              /* sorted by off, disjoint */
    size_t nlent, caplent;
    lent_queue q[TE_MAX_SHARES];   /* per chunk owner */
};

te_shares *te_shares_create(uint64_t segment_size, uint64_t chunk_size) {
    if (!segment_size || !chunk_size || (chunk_size & (chunk_size - 1))) return NULL;
    te_shares *s = xcalloc(1, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    s->size = segment_size;
    s->chunk = chunk_size;
    s->n = (uint32_t)(segment_size / chunk_size + (segment_size % chunk_size != 0));
    s->owner = xmalloc(s->n);
    memset(s->owner, -1, s->n);
    return s;
}

void te_shares_free(te_shares *s) {
    if (!s) return;
    pthread_mutex_destroy(&s->mu);
    for (int g = 0; g < TE_MAX_SHARES; g++) free(s->q[g].ev);
    free(s->lent);
    free(s->owner);
    free(s);
}

uint64_t te_shares_chunk_size(const te_shares *s) { return s->chunk; }
uint32_t te_shares_nchunks(const te_shares *s) { return s->n; }

void te_shares_set_group(te_shares *s, int g, const uint8_t key[TE_CAP_KEY_LEN], uint64_t term) {
    if (g < 0 || g >= TE_MAX_SHARES) return;
    pthread_mutex_lock(&s->mu);
    memcpy(s->g[g].key, key, TE_CAP_KEY_LEN);
    s->g[g].term = term;
    pthread_mutex_unlock(&s->mu);
}

int te_shares_set_owner(te_shares *s, uint32_t i, int g) {
    if (i >= s->n || g < -1 || g >= TE_MAX_SHARES) return -2;
    pthread_mutex_lock(&s->mu);
    int was = s->owner[i];
    s->owner[i] = (int8_t)g;
    pthread_mutex_unlock(&s->mu);
    return was;
}

int te_shares_owner(te_shares *s, uint32_t i) {
    if (i >= s->n) return -2;
    pthread_mutex_lock(&s->mu);
    int g = s->owner[i];
    pthread_mutex_unlock(&s->mu);
    return g;
}

uint32_t te_shares_grant(te_shares *s, int g, uint32_t k) {
    uint32_t got = 0;
    if (g < 0 || g >= TE_MAX_SHARES) return 0;
    pthread_mutex_lock(&s->mu);
    for (uint32_t i = 0; i < s->n && got < k; i++)
        if (s->owner[i] < 0) s->owner[i] = (int8_t)g, got++;
    pthread_mutex_unlock(&s->mu);
    return got;
}

/* Under mu: the index of the first lent range ending past off. */
static size_t lent_at(const te_shares *s, uint64_t off) {
    size_t lo = 0, hi = s->nlent;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->lent[mid].off + s->lent[mid].len <= off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Under mu: 1 if some lent range overlaps [off, off+len). */
static int lent_overlaps(const te_shares *s, uint64_t off, uint64_t len) {
    size_t i = lent_at(s, off);
    return i < s->nlent && s->lent[i].off < off + len;
}

/* ---- what a group's chunks lent and got back, for its master ---- */

/* Under mu: g's queue made anew from the ranges of its chunks lent now. */
static void queue_resync(te_shares *s, int g) {
    lent_queue *q = &s->q[g];
    q->head = q->n = 0;
    q->gen++;
    for (size_t i = 0; i < s->nlent; i++) {
        if (s->owner[s->lent[i].off / s->chunk] != g) continue;
        if (q->n == q->cap) {
            q->cap = q->cap ? 2 * q->cap : 64;
            q->ev = xrealloc(q->ev, q->cap * sizeof *q->ev);
        }
        q->ev[q->n++] = (te_lent_event){s->lent[i].off, s->lent[i].len, 0};
    }
}

/* Under mu: an event for the owner o of the chunk at off. */
static void queue_event(te_shares *s, int o, uint64_t off, uint64_t len, int back) {
    lent_queue *q = &s->q[o];
    if (q->n - q->head >= TE_MAX_LENT_EVENTS) {   /* its master takes none: the state now instead */
        queue_resync(s, o);
        return;
    }
    if (q->n == q->cap && q->head) {   /* room from what was taken */
        memmove(q->ev, q->ev + q->head, (q->n - q->head) * sizeof *q->ev);
        q->n -= q->head;
        q->head = 0;
    }
    if (q->n == q->cap) {
        q->cap = q->cap ? 2 * q->cap : 64;
        q->ev = xrealloc(q->ev, q->cap * sizeof *q->ev);
    }
    q->ev[q->n++] = (te_lent_event){off, len, back};
}

size_t te_shares_events(te_shares *s, int g, te_lent_event *out, size_t max, uint64_t *gen) {
    if (g < 0 || g >= TE_MAX_SHARES) return 0;
    pthread_mutex_lock(&s->mu);
    lent_queue *q = &s->q[g];
    size_t k = q->n - q->head < max ? q->n - q->head : max;
    if (k) memcpy(out, q->ev + q->head, k * sizeof *out);
    *gen = q->gen;
    pthread_mutex_unlock(&s->mu);
    return k;
}

void te_shares_events_done(te_shares *s, int g, uint64_t gen, size_t n) {
    if (g < 0 || g >= TE_MAX_SHARES) return;
    pthread_mutex_lock(&s->mu);
    lent_queue *q = &s->q[g];
    if (q->gen == gen) q->head += n < q->n - q->head ? n : q->n - q->head;
    if (q->head == q->n) q->head = q->n = 0;
    pthread_mutex_unlock(&s->mu);
}

void te_shares_events_resync(te_shares *s, int g) {
    if (g < 0 || g >= TE_MAX_SHARES) return;
    pthread_mutex_lock(&s->mu);
    queue_resync(s, g);
    pthread_mutex_unlock(&s->mu);
}

/* ---- lending ---- */

int te_shares_lend(te_shares *s, uint64_t off, uint64_t len, int g) {
    if (g < 0 || g >= TE_MAX_SHARES || !len || off >= s->size || len > s->size - off) return -1;
    pthread_mutex_lock(&s->mu);
    int o = s->owner[off / s->chunk];   /* every chunk of it another group's, the same */
    int ok = o >= 0 && o != g && !lent_overlaps(s, off, len) && s->nlent < TE_MAX_LENT;
    for (uint64_t c = off / s->chunk + 1; ok && c <= (off + len - 1) / s->chunk; c++) ok = s->owner[c] == o;
    if (ok) {
        if (s->nlent == s->caplent) {
            s->caplent = s->caplent ? 2 * s->caplent : 64;
            s->lent = xrealloc(s->lent, s->caplent * sizeof *s->lent);
        }
        size_t i = lent_at(s, off);
        memmove(&s->lent[i + 1], &s->lent[i], (s->nlent - i) * sizeof *s->lent);
        s->lent[i] = (lent_range){off, len, g};
        s->nlent++;
        queue_event(s, o, off, len, 0);
    }
    pthread_mutex_unlock(&s->mu);
    return ok ? 0 : -1;
}

/* The range lent at off back to its chunk's group, if lent to g (or,
 * owner set, lent by g to anyone). */
static uint64_t unlend(te_shares *s, uint64_t off, int g, int owner) {
    uint64_t len = 0;
    if (off >= s->size) return 0;
    pthread_mutex_lock(&s->mu);
    size_t i = lent_at(s, off);
    if (i < s->nlent && s->lent[i].off == off && (owner ? s->owner[off / s->chunk] == g : s->lent[i].g == g)) {
        len = s->lent[i].len;
        memmove(&s->lent[i], &s->lent[i + 1], (s->nlent - i - 1) * sizeof *s->lent);
        s->nlent--;
        int o = s->owner[off / s->chunk];
        if (o >= 0) queue_event(s, o, off, len, 1);
    }
    pthread_mutex_unlock(&s->mu);
    return len;
}

uint64_t te_shares_unlend(te_shares *s, uint64_t off, int g) { return unlend(s, off, g, 0); }

uint64_t te_shares_reclaim(te_shares *s, uint64_t off, int g) { return unlend(s, off, g, 1); }

int te_shares_lent_in(te_shares *s, uint64_t off, uint64_t len) {
    pthread_mutex_lock(&s->mu);
    int in = len && lent_overlaps(s, off, len);
    pthread_mutex_unlock(&s->mu);
    return in;
}

int te_shares_whose(te_shares *s, uint64_t off) {
    if (off >= s->size) return -2;
    pthread_mutex_lock(&s->mu);
    size_t i = lent_at(s, off);
    int g = i < s->nlent && s->lent[i].off <= off ? s->lent[i].g : s->owner[off / s->chunk];
    pthread_mutex_unlock(&s->mu);
    return g;
}

int te_shares_check(te_shares *s, const te_cap *cap, uint32_t node_id, te_op op, uint64_t off, uint64_t len,
                    uint64_t now_ms, int *gp) {
    int disk = op == TE_READ_DISK;   /* a record of the disk tier, not a range of the segment */
    if (len == 0 || (!disk && (off >= s->size || len > s->size - off))) return TE_ERANGE;
    pthread_mutex_lock(&s->mu);
    int g = -1;
    for (int i = 0; i < TE_MAX_SHARES && g < 0; i++)
        if (s->g[i].term && s->g[i].term == cap->term) g = i;
    uint8_t key[TE_CAP_KEY_LEN];
    int in = g >= 0;
    if (in) memcpy(key, s->g[g].key, sizeof key);
    for (uint64_t c = off / s->chunk; in && !disk && c <= (off + len - 1) / s->chunk; c++) in = s->owner[c] == g;
    if (g >= 0 && s->nlent && !disk) {   /* lent away: not the owner's; lent to g: g's */
        size_t i = lent_at(s, off);
        if (in) in = !lent_overlaps(s, off, len);
        else in = i < s->nlent && s->lent[i].g == g && s->lent[i].off <= off &&
                  off + len <= s->lent[i].off + s->lent[i].len;
    }
    pthread_mutex_unlock(&s->mu);
    if (gp) *gp = g;
    if (g < 0) return TE_EAUTH;   /* no group we serve has this term */
    int st = te_cap_check(cap, key, cap->term, node_id, op, off, len, now_ms);
    return st != TE_OK ? st : in ? TE_OK : TE_ERANGE;
}
