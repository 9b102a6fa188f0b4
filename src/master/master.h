/* master/master.h - the master role: the metadata (meta.h) behind RESP.
 *
 * master_role.c owns the process side (timers, start-up); master_cmds.c
 * turns each MOON.* command of PROTOCOL.md into calls on the metadata. */
#ifndef MKV_MASTER_H
#define MKV_MASTER_H

#include <stdint.h>

#include "backend/cap.h"
#include "master/ha.h"
#include "master/meta.h"
#include "proto/register.h"
#include "server/server.h"

#define MASTER_MAX_REPORT_BYTES (64u << 20)   /* buffered MOON.REPORT data */

#define MASTER_MAX_GATEWAYS 64   /* gateways listed at once (gateways.c) */
#define MASTER_GATEWAY_ADDR 64

/* A gateway that announced its RESP address (MOON.GATEWAY). */
typedef struct master_gateway {
    char addr[MASTER_GATEWAY_ADDR];   /* "host:port" */
    uint64_t last_ms;                 /* last announce, mono ms */
} master_gateway;

typedef struct put_wait put_wait;   /* put_wait.c */

typedef struct master {
    server *srv;
    master_meta *meta;
    uint8_t cap_key[TE_CAP_KEY_LEN];   /* signs capabilities; nodes get it at register */
    uint8_t reg_key[PROTO_REG_KEY_LEN];   /* from the cluster secret: register proofs */
    uint32_t default_replicas;
    /* Extents nodes reported (MOON.REPORT), waiting for MOON.REBUILD. */
    mm_report *reports;
    size_t nreports, capreports, report_bytes;
    resp_buf wire;                     /* scratch the proto encoders write replies into */
    master_gateway gateways[MASTER_MAX_GATEWAYS];
    size_t ngateways;
    master_ha *ha;                     /* --etcd: leadership; NULL: the only master */
    uint64_t terms_dropped;            /* lost terms whose metadata was dropped */
    uint64_t incarnation;              /* without etcd, the term: start ms << 10 | random */
    put_wait *waits;                   /* puts waiting for quarantined space */
} master;

master *master_create(server *srv);
void master_destroy(master *m);
/* Drop the buffered node reports (after a rebuild, at exit). */
void master_reports_clear(master *m);
/* MOON.* commands (master_cmds.c). */
void master_register_commands(server *srv);
/* MOON.GATEWAY: the registry of gateways (gateways.c). */
void master_register_gateway_commands(server *srv);
/* With --etcd, a standby (or a leader past its lease) refuses every
 * MOON.* command with -READONLY naming the leader (master_role.c). */
int master_gate(client *c, const command *cmd);
/* The term stamped into every capability and the registration reply:
 * the etcd leader key's create revision, or without etcd this process's
 * incarnation (so a restarted master's grants differ from the last's). */
uint64_t master_term(const master *m);
/* INFO fields of leadership: ha_role (single|leader|standby), term, leader. */
void master_leader_info(master *m, resp_buf *out);
/* INFO "# Cluster" (master_cmds.c). */
void master_info(server *srv, resp_buf *out, const char *section);
/* Export master_info's fields on /metrics. */
void master_register_metrics(server *srv);

/* Answer MOON.PUTSTART (batch 0: one item) or MPUTSTART items (master_cmds.c). */
void master_reply_puts(client *c, const mm_item *it, size_t n, int batch);

/* put_wait.c: a put whose items found no room waits up to put_wait_ms
 * for quarantined space (mm_space_due), its client blocked. */
put_wait *put_wait_create(master *m);
void put_wait_destroy(put_wait *w);
/* Park c's request (items as mm_put_start left them): 1 if parked (the
 * reply comes later), 0 if no wait could help (reply now). */
int put_wait_park(put_wait *w, client *c, mm_item *it, size_t n, uint32_t replicas, int batch,
                  uint64_t now_ms);
/* c is going: drop its parked request, revoking what was placed for it. */
void put_wait_forget(put_wait *w, client *c);
/* INFO fields: puts_waiting (now), puts_waited, puts_waited_nospace (ever). */
void put_wait_info(const put_wait *w, resp_buf *out);

/* The master role on an initialised server (master_role.c); the process
 * exit code. */
int master_role_main(server *srv);

#endif
