/* master/master_role.c - running the master: state, sweeps, the loop.
 *
 * One loop timer drives every periodic duty of the metadata (mm_sweep):
 * nodes past node_timeout die, puts past put_timeout are revoked, copy
 * tasks past their deadline fail, quarantined extents whose leases ran
 * out are freed, and repairs are scheduled. Its period is a quarter of
 * the shortest of those timeouts, so each fires at most 25% late. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/heap_huge.h"
#include "core/log.h"
#include "core/siphash.h"
#include "core/util.h"
#include "master/master.h"
#include "master/slot_move.h"
#include "master/slots.h"
#include "proto/pins.h"
#include "proto/status.h"
#include "proto/verbs.h"
#include "server/info.h"
#include "server/networking.h"
#include "server/commands.h"

static mm_config meta_config(const mkv_config *cfg) {
    mm_config mc;
    mm_config_defaults(&mc);
    mc.put_timeout_ms = (uint64_t)cfg->put_timeout_ms;
    mc.lease_ms = (uint64_t)cfg->lease_ms;
    mc.node_timeout_ms = (uint64_t)cfg->node_timeout_ms;
    mc.stripe_threshold = cfg->stripe_threshold;
    mc.stripe_unit = cfg->stripe_unit;
    mc.stripe_width = (uint32_t)cfg->stripe_width;
    mc.gc_policy = (uint32_t)cfg->maxmemory_policy;
    mc.gc_high_pct = (uint32_t)cfg->gc_high_watermark;
    mc.gc_low_pct = (uint32_t)cfg->gc_low_watermark;
    mc.disk_high_pct = (uint32_t)cfg->disk_high_watermark;
    mc.disk_low_pct = (uint32_t)cfg->disk_low_watermark;
    mc.disk_promote_after = (uint32_t)cfg->disk_promote_after;
    mc.max_nodes = (uint32_t)cfg->max_nodes;
    return mc;
}

master *master_create(server *srv) {
    master *m = xcalloc(1, sizeof *m);
    m->srv = srv;
    if (random_bytes(m->cap_key, sizeof m->cap_key) != 0) {
        free(m);
        return NULL;
    }
    proto_reg_key(srv->cfg.cluster_secret, m->reg_key);
    /* Start time with random low bits: two masters started in the same
     * millisecond still differ. */
    uint16_t salt = 0;
    (void)random_bytes(&salt, sizeof salt);
    m->incarnation = (wall_ms() << 10) | (salt & 1023u);
    m->term_start_ms = mono_ms();
    mm_config mc = meta_config(&srv->cfg);
    m->meta = mm_create(&mc);
    mm_repin_grace(m->meta, wall_ms() + PROTO_REPIN_GRACE_MS);   /* a restart: the clients' pins come again */
    m->default_replicas = srv->cfg.replicas > 0 ? (uint32_t)srv->cfg.replicas : 1;
    if (m->default_replicas > PROTO_MAX_REPLICAS) m->default_replicas = PROTO_MAX_REPLICAS;
    return m;
}

void master_destroy(master *m) {
    if (!m) return;
    master_rebuild_reset(m);
    resp_buf_free(&m->wire);
    free(m->items);
    mm_destroy(m->meta);
    free(m);
}

static void sweep_cb(event_loop *el, void *data) {
    master *m = data;
    uint64_t now = mono_ms();
    /* The loop stalled (a long command, a loaded machine): heartbeats
     * waited in our sockets, so the silence is ours, not the nodes'. */
    if (m->last_sweep_ms && now - m->last_sweep_ms > (uint64_t)m->srv->cfg.node_timeout_ms / 2) {
        uint64_t wall = wall_ms();
        for (uint32_t id = 1; id <= mm_node_count(m->meta); id++) mm_node_seen(m->meta, id, wall);
    }
    m->last_sweep_ms = now;
    mm_sweep(m->meta, wall_ms());
    master_rebuild_tick(m);
    members_tick(m->members);
}

/* The table's growth since the last wait goes on huge pages (heap_huge.h). */
static void heap_cb(event_loop *el, void *data) { heap_huge_advise(); }

static long long sweep_period_ms(const mkv_config *cfg) {
    int ms = cfg->node_timeout_ms;
    if (cfg->put_timeout_ms < ms) ms = cfg->put_timeout_ms;
    if (cfg->lease_ms < ms) ms = cfg->lease_ms;
    ms /= 4;
    if (ms < 10) ms = 10;
    if (ms > 1000) ms = 1000;
    return ms;
}

/* ---- the gate: members, leadership (--etcd) ---- */

/* A command that changes the cluster (CMD_MEMBER) needs a connection
 * that proved the cluster secret; with requirepass, AUTH (checked before
 * any command runs) is the gate instead. 1: refused, replied. */
static int member_refused(client *c, const command *cmd) {
    if (!(cmd->flags & CMD_MEMBER) || c->srv->cfg.requirepass[0] || master_conn_member(c)) return 0;
    master_reply_fail(c, PROTO_NOAUTH, "this command needs the cluster secret: send " PROTO_VERB_CHALLENGE
                      " and " PROTO_VERB_PROVE " (docs/SECURITY.md)");
    return 1;
}

int master_may_lead(const master *m) { return !m->ha || master_ha_may_lead(m->ha); }

int master_refuse_unless_leading(client *c) {
    master *m = c->srv->role;
    if (master_may_lead(m)) return 0;
    const ha_view *v = master_ha_view(m->ha);
    char msg[HA_ADDR_MAX + 64], text[HA_ADDR_MAX + 80];
    if (v->leader) snprintf(msg, sizeof msg, "leader is unknown (our lease ran out)");
    else if (v->leader_addr[0]) snprintf(msg, sizeof msg, "leader is %s", v->leader_addr);
    else snprintf(msg, sizeof msg, "leader is unknown (election in progress)");
    proto_error_text(PROTO_READONLY, msg, text, sizeof text);
    reply_error(c, text);
    return 1;
}

int master_gate(client *c, const command *cmd) {
    if (member_refused(c, cmd)) return 1;
    /* A standby answers what changes nothing: the proof (CMD_STALE) too. */
    if (strcmp(cmd->group, "moonkv") != 0 || (cmd->flags & CMD_STALE)) return 0;
    return master_refuse_unless_leading(c) || master_slots_refuse(((master *)c->srv->role)->slots, c);
}

/* srv->role_pipelined: a command runs while c's earlier answers wait for
 * their nodes (acks.c): its effect was had in order already, and its
 * reply queues behind theirs. */
static int master_pipelined(client *c, const command *cmd) { return 1; }

uint64_t master_term(const master *m) {
    if (!m->ha) return m->incarnation;
    int64_t t = master_ha_view(m->ha)->term;
    return t > 0 ? (uint64_t)t : 0;
}

void master_leader_info(master *m, resp_buf *out) {
    info_field(out, "master_term", "%llu", (unsigned long long)master_term(m));
    master_slots_info(m->slots, out);
    if (!m->ha) {
        info_field(out, "ha_role", "single");
        return;
    }
    const ha_view *v = master_ha_view(m->ha);
    info_field(out, "ha_role", "%s", master_ha_may_lead(m->ha) ? "leader" : "standby");
    info_field(out, "ha_term", "%lld", (long long)v->term);
    info_field(out, "ha_leader", "%s", v->leader_addr);
    info_field(out, "ha_elections_won", "%llu", (unsigned long long)v->elections_won);
    info_field(out, "ha_leadership_lost", "%llu", (unsigned long long)v->leadership_lost);
    members_info(m->members, out);
}

/* A new term starts the rejoin grace: the nodes of the last leader claim
 * their ids before new nodes get any (until the member records are read
 * from etcd). A leader that lost its term forgets what it placed: if it
 * leads again, nodes register afresh and nothing stale is handed out. */
static void leadership_changed(event_loop *el, void *data) {
    master *m = data;
    const ha_view *v = master_ha_view(m->ha);
    if (v->leadership_lost != m->terms_dropped) {
        m->terms_dropped = v->leadership_lost;
        log_notice("master: standing down: dropping the metadata of the lost term");
        mm_config mc = meta_config(&m->srv->cfg);
        acks_reset(m->acks);   /* answered -READONLY: we no longer lead */
        mm_destroy(m->meta);
        m->meta = mm_create(&mc);
        holdings_wait_reset(m->pulls);
        master_rebuild_reset(m);
        if (random_bytes(m->cap_key, sizeof m->cap_key) != 0) log_warning("master: no new capability key");
    }
    if (v->elections_won != m->elections_seen) {
        m->elections_seen = v->elections_won;
        m->term_start_ms = mono_ms();
        mm_repin_grace(m->meta, wall_ms() + PROTO_REPIN_GRACE_MS);   /* the old leader's pins come again */
    }
    members_term(m->members, v->leader ? v->term : 0);
}

static int start_ha(master *m, char *err, size_t errlen) {
    const mkv_config *cfg = &m->srv->cfg;
    if (!cfg->etcd[0]) return 0;
    char self[HA_ADDR_MAX];
    int n = snprintf(self, sizeof self, "%.200s:%d", cfg->bind, server_port(m->srv));
    if (n < 0 || (size_t)n >= sizeof self) return -1;
    m->members = members_create(m, err, errlen);
    if (!m->members) return -1;
    m->ha = master_ha_start(m->srv->loop, cfg->etcd, cfg->cluster_name, cfg->etcd_lease_ttl, self,
                            leadership_changed, m, err, errlen);
    if (!m->ha) {
        members_free(m->members);
        m->members = NULL;
        return -1;
    }
    log_notice("master: standby until elected (etcd %s, cluster %s, lease %d s)", cfg->etcd,
               cfg->cluster_name, cfg->etcd_lease_ttl);
    return 0;
}

int master_role_main(server *srv) {
    master *m = master_create(srv);
    if (!m) {
        log_warning("master: no randomness for the capability key");
        return 1;
    }
    if (!srv->cfg.cluster_secret[0])
        log_warning("master: cluster_secret is empty: any peer can register as a node and change "
                    "the cluster (docs/SECURITY.md)");
    srv->role = m;
    srv->role_gate = master_gate;
    srv->role_info = master_info;
    master_register_metrics(srv);
    t_server_register(srv);
    master_register_commands(srv);
    master_register_gateway_commands(srv);
    master_register_recovery_commands(srv);
    slot_move_register_commands(srv);
    char err[256];
    err[0] = '\0';
    if (server_listen(srv, err, sizeof err) < 0 || start_ha(m, err, sizeof err) < 0 ||
        (!(m->slots = master_slots_start(srv, err, sizeof err)) && err[0])) {
        log_warning("%s", err);
        master_ha_stop(m->ha);
        members_free(m->members);
        srv->role = NULL;
        srv->role_info = NULL;
        srv->role_gate = NULL;
        master_destroy(m);
        return 1;
    }
    m->waits = put_wait_create(m);
    m->gets = get_wait_create(m);
    m->acks = acks_create(m);
    m->pulls = holdings_wait_create(m);
    srv->role_pipelined = master_pipelined;
    heap_huge_setup();
    loop_hook *heap = loop_hook_add(srv->loop, SERVER_HOOK_FLUSH, heap_cb, NULL);
    loop_timer *sweep = loop_timer_create(srv->loop, sweep_cb, m);
    long long period = sweep_period_ms(&srv->cfg);
    loop_timer_start(sweep, period, period);
    log_notice("master ready: put timeout %dms, lease %dms, node timeout %dms",
               srv->cfg.put_timeout_ms, srv->cfg.lease_ms, srv->cfg.node_timeout_ms);
    server_run(srv);
    master_slots_stop(m->slots);
    m->slots = NULL;
    master_ha_stop(m->ha);
    m->ha = NULL;
    members_free(m->members);
    m->members = NULL;
    srv->role_gate = NULL;
    loop_timer_free(sweep);
    loop_hook_del(heap);
    put_wait_destroy(m->waits);
    m->waits = NULL;
    get_wait_destroy(m->gets);
    m->gets = NULL;
    srv->role_pipelined = NULL;
    acks_destroy(m->acks);
    m->acks = NULL;
    holdings_wait_destroy(m->pulls);
    m->pulls = NULL;
    srv->role = NULL;
    srv->role_info = NULL;
    master_destroy(m);
    return 0;
}
