/* server/metrics_http.c - the smallest HTTP/1.1 server that Prometheus
 * can scrape: GET (or HEAD) /metrics answers the exposition, other paths
 * 404, other methods 405, malformed or oversized requests 400/431. One
 * request per connection, closed after the reply. A request must arrive
 * whole within METRICS_HTTP_MAX_REQ bytes and METRICS_HTTP_DEADLINE_MS,
 * and at most METRICS_HTTP_MAX_CONNS are open at once, so a peer cannot
 * make the server hold much for long. When the table is full a new
 * connection pushes out the oldest one not waiting for its metrics, so
 * idle or dripping peers cannot starve a scrape. Runs on the server's loop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/anet.h"
#include "core/log.h"
#include "core/loop.h"
#include "core/util.h"
#include "server/metrics.h"
#include "server/server.h"

#define METRICS_HTTP_MAX_REQ     4096
#define METRICS_HTTP_DEADLINE_MS 5000
#define METRICS_HTTP_MAX_CONNS   16

typedef struct http_state http_state;

typedef struct http_conn {
    http_state *st;
    struct http_conn *prev, *next;
    int fd;
    loop_timer *deadline;
    char req[METRICS_HTTP_MAX_REQ];
    size_t reqlen;
    resp_buf reply;
    size_t sent;
    int head;                 /* HEAD: the headers only */
    int waiting;              /* for the store's stat (stat_async) */
    store_stat stat;
    int orphan;               /* closed while waiting: their arrival frees it */
} http_conn;

struct http_state {
    server *srv;
    int fd;
    int port;
    http_conn *conns;
    unsigned nconns;
};

static void conn_close(http_conn *hc) {
    http_state *st = hc->st;
    loop_del_file(st->srv->loop, hc->fd, LOOP_READABLE | LOOP_WRITABLE);
    close(hc->fd);
    loop_timer_free(hc->deadline);
    resp_buf_free(&hc->reply);
    if (hc->prev) hc->prev->next = hc->next;
    else st->conns = hc->next;
    if (hc->next) hc->next->prev = hc->prev;
    st->nconns--;
    if (hc->waiting) hc->orphan = 1;
    else free(hc);
}

static void write_cb(event_loop *el, int fd, void *data, int mask) {
    http_conn *hc = data;
    while (hc->sent < hc->reply.len) {
        ssize_t n = write(fd, hc->reply.data + hc->sent, hc->reply.len - hc->sent);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            loop_add_file(el, fd, LOOP_WRITABLE, write_cb, hc);
            return;
        }
        if (n <= 0) break;
        hc->sent += (size_t)n;
    }
    conn_close(hc);
}

static void respond(http_conn *hc, const char *status, const char *type, const resp_buf *body,
                    int head_only) {
    char hdr[256];
    size_t blen = body ? body->len : 0;
    int n = snprintf(hdr, sizeof hdr,
                     "HTTP/1.1 %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n",
                     status, type, blen);
    resp_buf_append(&hc->reply, hdr, (size_t)n);
    if (body && blen && !head_only) resp_buf_append(&hc->reply, body->data, blen);
    loop_del_file(hc->st->srv->loop, hc->fd, LOOP_READABLE);
    write_cb(hc->st->srv->loop, hc->fd, hc, LOOP_WRITABLE);
}

static void respond_text(http_conn *hc, const char *status, const char *text) {
    resp_buf b;
    resp_buf_init(&b);
    resp_buf_append(&b, text, strlen(text));
    respond(hc, status, "text/plain; charset=utf-8", &b, 0);
    resp_buf_free(&b);
}

/* The exposition, INFO's answers at hand. */
static void metrics_ready(void *ctx) {
    http_conn *hc = ctx;
    hc->waiting = 0;
    if (hc->orphan) {
        free(hc);
        return;
    }
    resp_buf body;
    resp_buf_init(&body);
    metrics_write(hc->st->srv, hc->st->srv->store ? &hc->stat : NULL, &body);
    respond(hc, "200 OK", "text/plain; version=0.0.4; charset=utf-8", &body, hc->head);
    resp_buf_free(&body);
}

/* The request line: "METHOD SP target SP HTTP/1.x". */
static void handle_request(http_conn *hc) {
    char method[8], target[256], version[16];
    char *eol = memchr(hc->req, '\r', hc->reqlen);
    size_t linelen = (size_t)(eol - hc->req);
    char line[512];
    if (linelen >= sizeof line) {
        respond_text(hc, "414 URI Too Long", "request line too long\n");
        return;
    }
    memcpy(line, hc->req, linelen);
    line[linelen] = '\0';
    if (sscanf(line, "%7s %255s %15s", method, target, version) != 3 ||
        strncmp(version, "HTTP/1.", 7) != 0) {
        respond_text(hc, "400 Bad Request", "malformed request line\n");
        return;
    }
    int head = strcmp(method, "HEAD") == 0;
    if (strcmp(method, "GET") != 0 && !head) {
        respond_text(hc, "405 Method Not Allowed", "only GET and HEAD\n");
        return;
    }
    target[strcspn(target, "?")] = '\0';   /* Prometheus may add parameters */
    if (strcmp(target, "/metrics") != 0) {
        respond_text(hc, "404 Not Found", "metrics are at /metrics\n");
        return;
    }
    hc->head = head;
    server *srv = hc->st->srv;
    if (!srv->store) {
        metrics_ready(hc);
        return;
    }
    hc->waiting = 1;   /* the loop serves on meanwhile (the cluster's master answers) */
    loop_del_file(srv->loop, hc->fd, LOOP_READABLE);
    srv->store->ops->stat_async(srv->store, &hc->stat, metrics_ready, hc);
}

static void read_cb(event_loop *el, int fd, void *data, int mask) {
    http_conn *hc = data;
    size_t room = sizeof hc->req - 1 - hc->reqlen;
    ssize_t n = read(fd, hc->req + hc->reqlen, room);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (n <= 0) {
        conn_close(hc);
        return;
    }
    hc->reqlen += (size_t)n;
    hc->req[hc->reqlen] = '\0';
    if (memmem(hc->req, hc->reqlen, "\r\n\r\n", 4)) handle_request(hc);
    else if (hc->reqlen == sizeof hc->req - 1) respond_text(hc, "431 Request Header Fields Too Large", "request too large\n");
}

static void deadline_cb(event_loop *el, void *data) { conn_close(data); }

/* Makes room for one more connection: closes the oldest one that is not
 * waiting for the role's INFO answers (still sending its request, or slow
 * to take its reply). 0 if every one is such a wait, a real scrape. */
static int evict_oldest(http_state *st) {
    http_conn *victim = NULL;
    for (http_conn *hc = st->conns; hc; hc = hc->next)   /* newest first */
        if (!hc->waiting) victim = hc;
    if (!victim) return 0;
    log_debug("metrics: %u connections open, closing the oldest for a new one", st->nconns);
    conn_close(victim);
    return 1;
}

static void accept_cb(event_loop *el, int lfd, void *data, int mask) {
    http_state *st = data;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            return;
        }
        if (st->nconns >= METRICS_HTTP_MAX_CONNS && !evict_oldest(st)) {
            close(fd);
            continue;
        }
        http_conn *hc = xcalloc(1, sizeof *hc);
        hc->st = st;
        hc->fd = fd;
        resp_buf_init(&hc->reply);
        hc->deadline = loop_timer_create(el, deadline_cb, hc);
        loop_timer_start(hc->deadline, METRICS_HTTP_DEADLINE_MS, 0);
        hc->next = st->conns;
        if (st->conns) st->conns->prev = hc;
        st->conns = hc;
        st->nconns++;
        loop_add_file(el, fd, LOOP_READABLE, read_cb, hc);
    }
}

int metrics_http_start(server *srv, char *err, size_t errlen) {
    char why[ANET_ERR_LEN];
    int fd = anet_tcp_server(why, srv->cfg.bind, srv->cfg.metrics_port, 64, 1);
    if (fd == ANET_ERR) {
        snprintf(err, errlen, "cannot listen for metrics on %s:%d: %s", srv->cfg.bind,
                 srv->cfg.metrics_port, why);
        return -1;
    }
    http_state *st = xcalloc(1, sizeof *st);
    st->srv = srv;
    st->fd = fd;
    if (anet_sock_port(why, fd, &st->port) != ANET_OK) st->port = srv->cfg.metrics_port;
    srv->metrics_http = st;
    loop_add_file(srv->loop, fd, LOOP_READABLE, accept_cb, st);
    log_notice("Metrics on http://%s:%d/metrics", srv->cfg.bind, st->port);
    return 0;
}

void metrics_http_stop(server *srv) {
    http_state *st = srv->metrics_http;
    if (!st) return;
    while (st->conns) conn_close(st->conns);
    loop_del_file(srv->loop, st->fd, LOOP_READABLE | LOOP_WRITABLE);
    close(st->fd);
    free(st);
    srv->metrics_http = NULL;
}
