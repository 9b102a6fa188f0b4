/* node/data_plane.c - see data_plane.h. */
#include "node/data_plane.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/claims.h"
#include "core/log.h"
#include "core/siphash.h"
#include "core/util.h"

typedef struct data_server {
    const te_data_server_ops *ops;
    void *srv;                   /* NULL: not running */
} data_server;

struct node_data {
    te_server_config sc;         /* what every server is given; servers pin what they bound */
    pthread_mutex_t mu;          /* the servers below (paused or restarted on identity) */
    data_server s[NODE_MAX_DATA_SERVERS];
    int ns;
    te_server_stats retired;     /* counters of servers already stopped */
    te_claims claims;            /* shared by every server: which write grant owns a range */
    int share_fd;                /* what shm clients get (share_fd()), -1: none of its own */
};

/* The fd same-host clients get: the segment's file opened anew (its own
 * open file description). The node's own fd holds the file's lock
 * (persist.c), and a client's copy of it, or a mapping made from it,
 * would hold that lock past the node's death: a node restarted on its
 * file would find it "in use" while any client kept it. -1: hand out
 * seg_fd itself (no /proc). */
static int share_fd(int seg_fd) {
    if (seg_fd < 0) return -1;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", seg_fd);
    return open(path, O_RDWR | O_CLOEXEC);
}

static void server_stop(node_data *d, data_server *s) {
    if (!s->srv) return;
    if (s->ops->stats) {
        te_server_stats st;
        s->ops->stats(s->srv, &st);
        st.conns_active = 0;
        te_server_stats_add(&d->retired, &st);
    }
    s->ops->stop(s->srv);
    s->srv = NULL;
}

static void stop_all(node_data *d) {
    for (int i = 0; i < d->ns; i++) server_stop(d, &d->s[i]);
}

/* Start every server not running that can run with what the node knows now. */
static int start_all(node_data *d, char *err, size_t errlen) {
    for (int i = 0; i < d->ns; i++) {
        data_server *s = &d->s[i];
        if (s->srv || (s->ops->needs_identity && !d->sc.have_cap_key)) continue;
        s->srv = s->ops->start(&d->sc, err, errlen);
        if (!s->srv) return -1;
    }
    return 0;
}

static void log_addrs(const node_data *d) {
    char addrs[TE_MAX_PATHS][TE_ADDR_LEN];
    for (int i = 0; i < d->ns; i++) {
        if (!d->s[i].srv) continue;
        int n = d->s[i].ops->addrs(&d->sc, addrs, TE_MAX_PATHS);
        for (int k = 0; k < n; k++) log_notice("data plane: %s %s", d->s[i].ops->name, addrs[k]);
    }
}

/* Keep the servers whose check passes; a check that says skip is logged. */
static int choose_servers(node_data *d, const node_data_config *cfg, char *err, size_t errlen) {
    for (int i = 0; i < cfg->nservers && i < NODE_MAX_DATA_SERVERS; i++) {
        const te_data_server_ops *ops = cfg->servers[i];
        char why[256];
        int rc = ops->check ? ops->check(&d->sc, why, sizeof why) : 0;
        if (rc < 0) { snprintf(err, errlen, "%s", why); return -1; }
        if (rc > 0) { log_warning("data plane: %s", why); continue; }
        d->s[d->ns++] = (data_server){ .ops = ops };
    }
    return 0;
}

node_data *node_data_start(const node_data_config *cfg, char *err, size_t errlen) {
    node_data *d = xcalloc(1, sizeof *d);
    pthread_mutex_init(&d->mu, NULL);
    te_claims_init(&d->claims, 0);
    d->sc.claims = &d->claims;
    d->sc.base = cfg->seg->base;
    d->sc.size = cfg->seg->size;
    d->share_fd = share_fd(cfg->seg->fd);
    d->sc.seg_fd = d->share_fd >= 0 ? d->share_fd : cfg->seg->fd;
    /* A restarted node is another incarnation: its clients map anew. */
    while (d->sc.incarnation == 0)
        if (random_bytes(&d->sc.incarnation, sizeof d->sc.incarnation) != 0) d->sc.incarnation = mono_us();
    snprintf(d->sc.secret, sizeof d->sc.secret, "%s", cfg->secret);
    d->sc.disk = cfg->disk && cfg->disk->read ? cfg->disk : NULL;
    d->sc.nlisten = cfg->ntcp;
    for (int i = 0; i < cfg->ntcp; i++) memcpy(d->sc.listen[i], cfg->tcp[i], TE_ADDR_LEN);
    /* No key yet: every request is refused until registration. */
    if (choose_servers(d, cfg, err, errlen) != 0 || start_all(d, err, errlen) != 0) {
        stop_all(d);
        if (d->share_fd >= 0) close(d->share_fd);
        te_claims_free(&d->claims);
        pthread_mutex_destroy(&d->mu);
        free(d);
        return NULL;
    }
    log_addrs(d);
    return d;
}

int node_data_claim(node_data *d, const te_cap *cap) {
    return te_claims_write(&d->claims, cap, wall_ms());
}

/* Every server quiet: no connection open, no request in flight. A server
 * that can pause keeps its listeners (connects queue meanwhile), the
 * others stop. */
static void quiesce_all(node_data *d) {
    for (int i = 0; i < d->ns; i++) {
        data_server *s = &d->s[i];
        if (s->srv && s->ops->pause) s->ops->pause(s->srv);
        else server_stop(d, s);
    }
}

/* Serve d->sc's identity: paused servers resume, the others start. */
static int serve_again(node_data *d, char *err, size_t errlen) {
    for (int i = 0; i < d->ns; i++)
        if (d->s[i].srv) d->s[i].ops->resume(d->s[i].srv, &d->sc);
    return start_all(d, err, errlen);
}

int node_data_set_identity(node_data *d, uint32_t id, const uint8_t key[TE_CAP_KEY_LEN],
                           uint64_t term, uint64_t grants_from_ms, char *err, size_t errlen) {
    pthread_mutex_lock(&d->mu);
    /* The node id is fixed per connection: serve anew under it, knowing
     * no claims and honouring no grant made before we asked, once no
     * request of the old identity is in flight. */
    quiesce_all(d);
    te_claims_reset(&d->claims, grants_from_ms);
    d->sc.node_id = id;
    d->sc.have_cap_key = 1;
    memcpy(d->sc.cap_key, key, TE_CAP_KEY_LEN);
    d->sc.cap_term = term;
    int rc = serve_again(d, err, errlen);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

int node_data_set_shares(node_data *d, uint32_t id, struct te_shares *shares, uint64_t started_ms, char *err,
                         size_t errlen) {
    pthread_mutex_lock(&d->mu);
    quiesce_all(d);
    te_claims_reset(&d->claims, started_ms);
    d->sc.node_id = id;
    d->sc.have_cap_key = 1;   /* the keys are the groups', in shares */
    d->sc.shares = shares;
    int rc = serve_again(d, err, errlen);
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void node_data_forget_claims(node_data *d, uint64_t off, uint64_t end) {
    te_claims_forget(&d->claims, off, end);
}

int node_data_addrs(const node_data *d, char out[][TE_ADDR_LEN], int max) {
    int n = 0;
    for (int i = 0; i < d->ns && n < max; i++) n += d->s[i].ops->addrs(&d->sc, out + n, max - n);
    return n;
}

void node_data_stats(node_data *d, te_server_stats *out) {
    pthread_mutex_lock(&d->mu);
    *out = d->retired;
    out->conns_active = 0;
    for (int i = 0; i < d->ns; i++) {
        if (!d->s[i].srv || !d->s[i].ops->stats) continue;
        te_server_stats st;
        d->s[i].ops->stats(d->s[i].srv, &st);
        te_server_stats_add(out, &st);
    }
    pthread_mutex_unlock(&d->mu);
}

void node_data_stop(node_data *d) {
    if (!d) return;
    pthread_mutex_lock(&d->mu);
    stop_all(d);
    pthread_mutex_unlock(&d->mu);
    if (d->share_fd >= 0) close(d->share_fd);
    te_claims_free(&d->claims);
    pthread_mutex_destroy(&d->mu);
    free(d);
}
