/* backend/claims.c - see claims.h. */
#include "backend/claims.h"

#include <stdlib.h>
#include <string.h>

#include "core/util.h"

void te_claims_init(te_claims *c, uint64_t now_ms) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    c->started_ms = now_ms;
}

void te_claims_reset(te_claims *c, uint64_t now_ms) {
    pthread_mutex_lock(&c->mu);
    c->n = 0;
    c->started_ms = now_ms;
    pthread_mutex_unlock(&c->mu);
}

void te_claims_free(te_claims *c) {
    free(c->v);
    pthread_mutex_destroy(&c->mu);
    memset(c, 0, sizeof *c);
}

/* Index of the first claim ending after off. */
static size_t first_after(const te_claims *c, uint64_t off) {
    size_t lo = 0, hi = c->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->v[mid].end <= off) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Drop claims no older grant can still contest. Amortised: only when
 * the array is about to grow. */
static void expire(te_claims *c, uint64_t now_ms) {
    size_t w = 0;
    for (size_t i = 0; i < c->n; i++)
        if (now_ms * 1000 < c->v[i].issued_us + TE_CLAIM_HORIZON_MS * 1000) c->v[w++] = c->v[i];
    c->n = w;
}

static int reserve(te_claims *c, size_t extra, uint64_t now_ms) {
    if (c->n + extra <= c->cap) return 0;
    expire(c, now_ms);
    if (c->n + extra <= c->cap) return 0;
    if (c->n + extra > TE_CLAIMS_MAX) return -1;
    size_t cap = c->cap ? c->cap * 2 : 64;
    while (cap < c->n + extra) cap *= 2;
    if (cap > TE_CLAIMS_MAX) cap = TE_CLAIMS_MAX;
    c->v = xrealloc(c->v, cap * sizeof *c->v);
    c->cap = cap;
    return 0;
}

/* Replace claims [i, j) - the ones overlapping [off, end) - by the
 * parts of the first and last that stick out, plus the new claim. */
static int replace(te_claims *c, size_t i, size_t j, te_claim nc, uint64_t now_ms) {
    te_claim keep[3];
    int k = 0;
    if (i < j && c->v[i].off < nc.off) keep[k++] = (te_claim){c->v[i].off, nc.off, c->v[i].issued_us};
    keep[k++] = nc;
    if (i < j && c->v[j - 1].end > nc.end) keep[k++] = (te_claim){nc.end, c->v[j - 1].end, c->v[j - 1].issued_us};
    size_t removed = j - i;
    if ((size_t)k > removed) {
        if (reserve(c, (size_t)k - removed, now_ms) != 0) return -1;
        /* reserve may have dropped expired claims: find the range again */
        i = first_after(c, nc.off);
        for (j = i; j < c->n && c->v[j].off < nc.end; j++) {}
        removed = j - i;
    }
    memmove(&c->v[i + k], &c->v[j], (c->n - j) * sizeof *c->v);
    memcpy(&c->v[i], keep, (size_t)k * sizeof *keep);
    c->n = c->n - removed + (size_t)k;
    return 0;
}

int te_claims_write(te_claims *c, const te_cap *cap, uint64_t now_ms) {
    uint64_t expiry_us = cap->expiry_ms * 1000;
    if (cap->issued_us < c->started_ms * 1000 || expiry_us < cap->issued_us ||
        expiry_us - cap->issued_us > TE_CLAIM_HORIZON_MS * 1000 || cap->length == 0 ||
        cap->expiry_ms > UINT64_MAX / 1000)
        return TE_EAUTH;
    te_claim nc = {cap->offset, cap->offset + cap->length, cap->issued_us};
    if (nc.end < nc.off) return TE_EAUTH;
    pthread_mutex_lock(&c->mu);
    size_t i = first_after(c, nc.off), j = i;
    int st = TE_OK, same = 0;
    for (; j < c->n && c->v[j].off < nc.end; j++) {
        if (c->v[j].issued_us > nc.issued_us) st = TE_EAUTH;
        if (c->v[j].off == nc.off && c->v[j].end == nc.end && c->v[j].issued_us == nc.issued_us)
            same = 1;
    }
    if (st == TE_OK && !same && replace(c, i, j, nc, now_ms) != 0) st = TE_EAUTH;
    if (st != TE_OK) c->refused++;
    pthread_mutex_unlock(&c->mu);
    return st;
}

size_t te_claims_count(te_claims *c) {
    pthread_mutex_lock(&c->mu);
    size_t n = c->n;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void te_claims_forget(te_claims *c, uint64_t off, uint64_t end) {
    pthread_mutex_lock(&c->mu);
    size_t w = 0, n = c->n;
    te_claim *keep = xmalloc((2 * n + 1) * sizeof *keep);
    for (size_t i = 0; i < n; i++) {
        te_claim x = c->v[i];
        if (x.end <= off || x.off >= end) {
            keep[w++] = x;
            continue;
        }
        if (x.off < off) keep[w++] = (te_claim){x.off, off, x.issued_us};
        if (x.end > end) keep[w++] = (te_claim){end, x.end, x.issued_us};
    }
    if (w > c->cap) {
        c->v = xrealloc(c->v, w * sizeof *c->v);
        c->cap = w;
    }
    if (w) memcpy(c->v, keep, w * sizeof *keep);
    c->n = w;
    free(keep);
    pthread_mutex_unlock(&c->mu);
}
