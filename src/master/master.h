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

/* The master role on an initialised server (master_role.c); the process
 * exit code. */
int master_role_main(server *srv);

#endif
