/* client/pins.c - a prefix lookup that pins its hits (MOON.PREFIXPIN,
 * MOON.UNPIN: proto/pins.h), so the objects it found are still there when
 * the engine loads them. The pin's id is drawn here (random, nonzero,
 * below 2^63) unless the caller brings one; every chunk of a long lookup
 * goes under the same id.
 *
 * The pins live in the leader's memory, so the client keeps what it
 * pinned (ids, keys, until when) and pins it again, by name, on every
 * master connection it opens (MOON.REPIN): after a failover the new
 * leader holds them as soon as the connection moved to it (pinkeep.c
 * opens it without waiting for a call), before the nodes' reports may
 * have told it of the keys. On the same master again the re-pin adds
 * nothing (a pin holds a key once). */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "client/client.h"
#include "core/util.h"
#include "proto/cmd.h"
#include "proto/pins.h"
#include "proto/replies.h"

#define PIN_ID_MASK (UINT64_MAX >> 1)   /* ids are 1 to 2^63-1 */

/* One live pin: its keys one after another, each a uint32 length and bytes. */
struct mkv_pinrec {
    uint64_t id, until_ms;        /* mono_ms */
    char *keys;
    size_t len, cap, nkeys;
    mkv_pinrec *next;
};

void mkv_pins_init(mkv_pins *p) {
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    p->wake = -1;
}

static void rec_free(mkv_pinrec *r) {
    free(r->keys);
    free(r);
}

void mkv_pins_free(mkv_pins *p) {
    while (p->head) {
        mkv_pinrec *r = p->head;
        p->head = r->next;
        rec_free(r);
    }
    pthread_mutex_destroy(&p->mu);
}

/* The live record of id (unlinked if take); expired ones dropped on the
 * way (the master let them go too). mu held. */
static mkv_pinrec *rec_find(mkv_pins *p, uint64_t id, int take, uint64_t now) {
    for (mkv_pinrec **at = &p->head; *at;) {
        mkv_pinrec *r = *at;
        if (r->until_ms <= now) {
            *at = r->next;
            rec_free(r);
            continue;
        }
        if (r->id == id) {
            if (take) *at = r->next;
            return r;
        }
        at = &r->next;
    }
    return NULL;
}

/* objs[0..n) pinned under id until ms from now: remembered. */
static void pins_note(mkv_pins *p, uint64_t id, uint32_t ms, const mkv_obj *objs, size_t n) {
    if (n == 0) return;
    uint64_t now = mono_ms();
    pthread_mutex_lock(&p->mu);
    mkv_pinrec *r = rec_find(p, id, 0, now);
    if (!r) {
        r = xcalloc(1, sizeof *r);
        r->id = id;
        r->next = p->head;
        p->head = r;
    }
    if (now + ms > r->until_ms) r->until_ms = now + ms;
    for (size_t i = 0; i < n; i++) {
        uint32_t kl = (uint32_t)objs[i].keylen;
        if (r->len + sizeof kl + kl > r->cap) {
            r->cap = (r->len + sizeof kl + kl) * 2;
            r->keys = xrealloc(r->keys, r->cap);
        }
        memcpy(r->keys + r->len, &kl, sizeof kl);
        memcpy(r->keys + r->len + sizeof kl, objs[i].key, kl);
        r->len += sizeof kl + kl;
        r->nkeys++;
    }
    pthread_mutex_unlock(&p->mu);
}

int mkv_pins_live(mkv_pins *p, uint64_t now_ms) {
    rec_find(p, 0, 0, now_ms);   /* drops the expired (no pin has id 0) */
    return p->head != NULL;
}

static void pins_forget(mkv_pins *p, uint64_t id) {
    pthread_mutex_lock(&p->mu);
    mkv_pinrec *r = rec_find(p, id, 1, mono_ms());
    pthread_mutex_unlock(&p->mu);
    if (r) rec_free(r);
}

/* MOON.REPIN for r's keys, PROTO_MAX_BATCH a command, appended to rc:
 * how many commands. */
static int repin_append(redisContext *rc, const mkv_pinrec *r, uint32_t ms) {
    int cmds = 0;
    for (size_t off = 0, done = 0; done < r->nkeys; cmds++) {
        size_t n = r->nkeys - done < PROTO_MAX_BATCH ? r->nkeys - done : PROTO_MAX_BATCH;
        proto_cmd cmd;
        proto_cmd_repin_begin(&cmd, r->id, ms, n);
        for (size_t i = 0; i < n; i++) {
            uint32_t kl;
            memcpy(&kl, r->keys + off, sizeof kl);
            proto_cmd_bin(&cmd, r->keys + off + sizeof kl, kl);
            off += sizeof kl + kl;
        }
        redisAppendCommandArgv(rc, cmd.argc, cmd.argv, cmd.lens);
        proto_cmd_free(&cmd);
        done += n;
    }
    return cmds;
}

int mkv_pins_restore(mkv_pins *p, redisContext *rc, char *err, size_t errlen) {
    pthread_mutex_lock(&p->mu);
    uint64_t now = mono_ms();
    rec_find(p, 0, 0, now);   /* drop the expired (no pin has id 0) */
    int fail = 0;
    for (mkv_pinrec **at = &p->head; *at && !fail;) {
        mkv_pinrec *r = *at;
        uint64_t left = r->until_ms - now;
        int cmds = repin_append(rc, r, (uint32_t)(left > PROTO_PIN_MAX_MS ? PROTO_PIN_MAX_MS : left));
        int refused = 0;
        for (int i = 0; i < cmds; i++) {
            redisReply *rep = NULL;
            if (redisGetReply(rc, (void **)&rep) != REDIS_OK || !rep) {
                snprintf(err, errlen, "%s", rc->errstr[0] ? rc->errstr : "connection lost");
                fail = 1;
                break;
            }
            if (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "READONLY", 8)) {
                snprintf(err, errlen, "%s", rep->str);   /* not the leader: keep them for the next */
                fail = 1;
            }
            refused |= rep->type != REDIS_REPLY_INTEGER;
            freeReplyObject(rep);
        }
        if (refused && !fail) {   /* a bound: the pin cannot be had here */
            *at = r->next;
            rec_free(r);
        } else {
            at = &r->next;
        }
    }
    pthread_mutex_unlock(&p->mu);
    return fail ? -1 : 0;
}

static uint64_t draw_id(void) {
    uint64_t id = 0;
    while ((id & PIN_ID_MASK) == 0)
        if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) id = mono_us() ^ (uint64_t)rand() << 20;
    return id & PIN_ID_MASK;
}

/* MOON.PREFIXPIN over one chunk: how many leading keys are present (and now pinned). */
static int prefixpin_run(mkv_client *c, uint64_t id, uint32_t ms, const mkv_obj *objs, size_t n,
                         size_t *count) {
    proto_cmd cmd;
    proto_cmd_prefixpin_begin(&cmd, id, ms, n);
    int rc;
    redisReply *r = mkv_keys_run(c, &cmd, objs, n, &rc);
    if (!r) return rc;
    rc = mkv_prefix_count(c, PROTO_VERB_PREFIXPIN, r, n, count);
    freeReplyObject(r);
    return rc;
}

int mkv_exists_prefix_pin(mkv_client *c, const mkv_obj *objs, size_t n, uint32_t pin_ms, uint64_t *pin,
                          size_t *count) {
    if (!c || !count || !pin || (!objs && n)) return MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_refused(c, "a pinned prefix"));
    MKV_ON_LANE(c);
    *count = 0;
    if (pin_ms == 0 || pin_ms > PROTO_PIN_MAX_MS)
        return mkv_fail(c, MKV_EINVAL, "pin time must be 1 to %u ms", PROTO_PIN_MAX_MS);
    if (*pin > PIN_ID_MASK) return mkv_fail(c, MKV_EINVAL, "pin id must be below 2^63");
    if (*pin == 0) *pin = draw_id();
    for (size_t i = 0; i < n; i += PROTO_MAX_BATCH) {
        size_t chunk = n - i < PROTO_MAX_BATCH ? n - i : PROTO_MAX_BATCH, hit = 0;
        int rc = prefixpin_run(c, *pin, pin_ms, objs + i, chunk, &hit);
        if (rc != MKV_OK) return rc;   /* chunks pinned before stay under *pin: unpin it */
        pins_note(&c->core->pins, *pin, pin_ms, objs + i, hit);
        if (hit) mkv_pinkeep_start(c->core);   /* re-pins on a new leader at once */
        *count += hit;
        if (hit < chunk) break;
    }
    return MKV_OK;
}

int mkv_unpin(mkv_client *c, uint64_t pin, size_t *keys) {
    if (!c || pin == 0 || pin > PIN_ID_MASK) return c ? mkv_fail(c, MKV_EINVAL, "no such pin id") : MKV_EINVAL;
    MKV_ROUTED(c, mkv_route_refused(c, "unpin"));
    MKV_ON_LANE(c);
    pins_forget(&c->core->pins, pin);   /* even if the reply is lost: we let go of it */
    proto_cmd cmd;
    proto_cmd_unpin(&cmd, pin);
    int rc;
    redisReply *r = mkv_cmd_run(c, &cmd, &rc);
    if (!r) return rc;
    long long n;
    if (proto_dec_int(r, 0, INT64_MAX, &n) == 0) {
        if (keys) *keys = (size_t)n;
    } else {
        rc = mkv_bad_reply(c, PROTO_VERB_UNPIN, r);
    }
    freeReplyObject(r);
    return rc;
}
