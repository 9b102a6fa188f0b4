/* master/ha.c - see ha.h: the campaign thread and its hand-over to the loop. */
#include "master/ha.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/cond.h"
#include "core/log.h"
#include "core/util.h"
#include "etcd/etcd.h"

#define HA_ETCD_TIMEOUT_MS 500   /* one etcd call; etcd is expected on a near host */

struct master_ha {
    etcd_client *ec;
    char key[ETCD_KEY_MAX];
    char self[HA_ADDR_MAX];
    int ttl_s;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;           /* wakes the thread to stop */
    int stop;
    ha_view shared;              /* written by the thread, under mu */
    ha_view view;                /* the loop's copy */
    loop_wake *wake;
    loop_proc *on_change;
    void *data;
    /* Thread only. */
    int64_t lease;
    uint64_t granted_ms;         /* when we asked for it: its expiry is later */
};

/* ---- the thread ---- */

/* Sleep ms unless stopped; 1 if stopping. */
static int nap(master_ha *ha, int ms) {
    struct timespec ts = cond_deadline_ms(ms);
    pthread_mutex_lock(&ha->mu);
    while (!ha->stop && pthread_cond_timedwait(&ha->cv, &ha->mu, &ts) != ETIMEDOUT) {}
    int stop = ha->stop;
    pthread_mutex_unlock(&ha->mu);
    return stop;
}

/* Publish a new view to the loop. */
static void publish(master_ha *ha, int leader, uint64_t deadline, int64_t term, const char *addr) {
    pthread_mutex_lock(&ha->mu);
    ha_view *v = &ha->shared;
    if (leader && !v->leader) v->elections_won++;
    if (!leader && v->leader) v->leadership_lost++;
    v->leader = leader;
    v->deadline_ms = deadline;
    v->term = term;
    snprintf(v->leader_addr, sizeof v->leader_addr, "%s", addr);
    pthread_mutex_unlock(&ha->mu);
    loop_wake_send(ha->wake);
}

static void drop_lease(master_ha *ha) {
    char err[ETCD_ERR_LEN];
    if (ha->lease) etcd_lease_revoke(ha->ec, ha->lease, err, sizeof err);
    ha->lease = 0;
}

/* Lead until the lease is lost or we stop: keep-alive every ttl/3. */
static void lead(master_ha *ha, int64_t term) {
    uint64_t ttl_ms = (uint64_t)ha->ttl_s * 1000;
    uint64_t deadline = ha->granted_ms + ttl_ms;
    publish(ha, 1, deadline, term, ha->self);
    log_notice("master: leader of the cluster (term %lld, lease %d s)", (long long)term, ha->ttl_s);
    while (!nap(ha, (int)(ttl_ms / 3))) {
        char err[ETCD_ERR_LEN] = "";
        int64_t left = 0;
        uint64_t sent = mono_ms();
        if (etcd_lease_keepalive(ha->ec, ha->lease, &left, err, sizeof err) == 0 && left > 0) {
            deadline = sent + ttl_ms;
            publish(ha, 1, deadline, term, ha->self);
            continue;
        }
        if (left == 0 && !err[0]) snprintf(err, sizeof err, "lease expired");
        if (mono_ms() < deadline && strcmp(err, "lease expired") != 0) {
            log_warning("master: lease keep-alive failed (retrying until the lease ends): %s", err);
            continue;
        }
        log_warning("master: leadership lost (term %lld): %s", (long long)term, err);
        ha->lease = 0;   /* gone or unreachable: nothing to revoke */
        publish(ha, 0, 0, 0, "");
        return;
    }
}

/* One campaign: a lease, then the create-if-absent txn. */
static void campaign(master_ha *ha) {
    char err[ETCD_ERR_LEN], holder[HA_ADDR_MAX];
    int won = 0;
    int64_t term = 0;
    ha->granted_ms = mono_ms();
    if (!ha->lease && etcd_lease_grant(ha->ec, ha->ttl_s, &ha->lease, err, sizeof err) != 0) {
        log_info("master: etcd: %s", err);
        return;
    }
    if (etcd_create_key(ha->ec, ha->key, ha->self, ha->lease, &won, holder, sizeof holder, &term,
                        err, sizeof err) != 0) {
        log_info("master: etcd: %s", err);
        drop_lease(ha);
        return;
    }
    if (won) {
        lead(ha, term);
        return;
    }
    drop_lease(ha);   /* a fresh one at the next campaign: this one would expire unused */
    publish(ha, 0, 0, term, holder);
}

static void *ha_main(void *arg) {
    master_ha *ha = arg;
    while (!nap(ha, 0)) {
        char err[ETCD_ERR_LEN], addr[HA_ADDR_MAX];
        int found = 0;
        int64_t term = 0;
        if (etcd_get(ha->ec, ha->key, &found, addr, sizeof addr, &term, err, sizeof err) != 0) {
            log_info("master: etcd: %s", err);
            publish(ha, 0, 0, 0, "");
        } else if (!found) {
            campaign(ha);
            continue;   /* won and lost since, or lost the race: look again at once */
        } else {
            publish(ha, 0, 0, term, addr);
        }
        if (nap(ha, HA_POLL_MS)) break;
    }
    drop_lease(ha);
    return NULL;
}

/* ---- the loop side ---- */

static void wake_cb(event_loop *el, void *data) {
    master_ha *ha = data;
    pthread_mutex_lock(&ha->mu);
    int changed = ha->view.leader != ha->shared.leader || ha->view.term != ha->shared.term;
    ha->view = ha->shared;
    pthread_mutex_unlock(&ha->mu);
    if (changed && ha->on_change) ha->on_change(el, ha->data);
}

master_ha *master_ha_start(event_loop *el, const char *etcd, const char *cluster, int ttl_s,
                           const char *self_addr, loop_proc *on_change, void *data, char *err,
                           size_t errlen) {
    master_ha *ha = xcalloc(1, sizeof *ha);
    ha->ec = etcd_create(etcd, HA_ETCD_TIMEOUT_MS, err, errlen);
    if (!ha->ec || etcd_leader_key(cluster, ha->key, sizeof ha->key) != 0) {
        if (ha->ec) snprintf(err, errlen, "cluster name too long");
        etcd_free(ha->ec);
        free(ha);
        return NULL;
    }
    snprintf(ha->self, sizeof ha->self, "%s", self_addr);
    ha->ttl_s = ttl_s > 0 ? ttl_s : 2;
    ha->on_change = on_change;
    ha->data = data;
    pthread_mutex_init(&ha->mu, NULL);
    cond_init_mono(&ha->cv);
    ha->wake = loop_wake_create(el, wake_cb, ha);
    pthread_create(&ha->th, NULL, ha_main, ha);
    return ha;
}

void master_ha_stop(master_ha *ha) {
    if (!ha) return;
    pthread_mutex_lock(&ha->mu);
    ha->stop = 1;
    pthread_cond_signal(&ha->cv);
    pthread_mutex_unlock(&ha->mu);
    pthread_join(ha->th, NULL);
    loop_wake_free(ha->wake);
    pthread_cond_destroy(&ha->cv);
    pthread_mutex_destroy(&ha->mu);
    etcd_free(ha->ec);
    free(ha);
}

const ha_view *master_ha_view(const master_ha *ha) { return &ha->view; }

int master_ha_may_lead(const master_ha *ha) {
    return ha->view.leader && mono_ms() < ha->view.deadline_ms;
}
