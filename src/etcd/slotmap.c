/* etcd/slotmap.c - see slotmap.h. */
#include "etcd/slotmap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/util.h"

int etcd_group_cluster(const char *cluster, const char *group, char *buf, size_t len) {
    if (!proto_group_ok(group, strlen(group))) return -1;
    int n = snprintf(buf, len, "%s/g/%s", cluster, group);
    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The map's text into text[PROTO_SLOTMAP_MAX] ("" if none). */
static int read_text(etcd_client *ec, const char *cluster, char *text, int *found, char *err, size_t errlen) {
    char key[ETCD_KEY_MAX];
    int64_t rev;
    if (etcd_cluster_key(cluster, "slots", key, sizeof key) != 0) {
        snprintf(err, errlen, "cluster name too long for an etcd key");
        return -1;
    }
    text[0] = '\0';
    return etcd_get(ec, key, found, text, PROTO_SLOTMAP_MAX, &rev, err, errlen);
}

int etcd_slotmap_read(etcd_client *ec, const char *cluster, proto_slotmap *m, int *found, char *err,
                      size_t errlen) {
    char *text = xmalloc(PROTO_SLOTMAP_MAX);
    int rc = read_text(ec, cluster, text, found, err, errlen);
    if (rc == 0 && *found) rc = proto_slotmap_parse(text, strlen(text), m, err, errlen);
    else if (rc == 0) proto_slotmap_init(m);
    free(text);
    return rc;
}

int etcd_slotmap_change(etcd_client *ec, const char *cluster, etcd_slotmap_fn *fn, void *ctx, int *changed,
                        uint64_t *version, char *err, size_t errlen) {
    char key[ETCD_KEY_MAX];
    if (etcd_cluster_key(cluster, "slots", key, sizeof key) != 0) {
        snprintf(err, errlen, "cluster name too long for an etcd key");
        return -1;
    }
    char *old = xmalloc(PROTO_SLOTMAP_MAX), *next = xmalloc(PROTO_SLOTMAP_MAX);
    proto_slotmap *m = xmalloc(sizeof *m);
    int rc = -1;
    for (int t = 0; t < SLOTMAP_CAS_TRIES; t++) {
        int found = 0, ok = 0;
        if (read_text(ec, cluster, old, &found, err, errlen) != 0) break;
        if (found && proto_slotmap_parse(old, strlen(old), m, err, errlen) != 0) break;
        if (!found) proto_slotmap_init(m);
        if ((*changed = fn(m, ctx, err, errlen)) < 0) break;
        *version = m->version;
        if (*changed == 0) {
            rc = 0;
            break;
        }
        m->version++;
        if (!proto_slotmap_format(m, next, PROTO_SLOTMAP_MAX)) {
            snprintf(err, errlen, "slot map: more than %d ranges", PROTO_MAX_RANGES);
            break;
        }
        if (etcd_put_if_value(ec, key, next, found ? old : NULL, &ok, err, errlen) != 0) break;
        if (ok) {
            *version = m->version;
            rc = 0;
            break;
        }
        snprintf(err, errlen, "slot map: changed by another writer %d times in a row", t + 1);
    }
    free(old);
    free(next);
    free(m);
    return rc;
}

typedef struct assign_ctx {
    const char *list, *group;
    int only_free;
} assign_ctx;

static int assign_fn(proto_slotmap *m, void *arg, char *err, size_t errlen) {
    const assign_ctx *a = arg;
    int changed;
    return proto_slotmap_assign_list(m, a->list, a->group, a->only_free, &changed, err, errlen) ? -1 : changed;
}

int etcd_slotmap_assign(etcd_client *ec, const char *cluster, const char *list, const char *group,
                        int only_free, int *changed, uint64_t *version, char *err, size_t errlen) {
    assign_ctx a = {list, group, only_free};
    return etcd_slotmap_change(ec, cluster, assign_fn, &a, changed, version, err, errlen);
}
