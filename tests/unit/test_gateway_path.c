/* test_gateway_path - the gateway's request path (gateway_async.c: GET
 * and MGET through store.h get_async, SET shipped and answered from its
 * outcome, DBSIZE, SCAN, KEYS, INFO and FLUSHALL through stat_async,
 * scan_async and flush_async, MOON.PREFIX, PREFIXPIN and UNPIN through
 * pin_async, replies into reply slots) against
 * a fake cluster: a store whose reads complete when the test says, and
 * the store_cluster.c functions gateway_async.c calls, defined here (the
 * real store_cluster.o is then never linked). No cluster, no master, no
 * TCP: the client is one end of a socketpair, the loop is the server's. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/anet.h"
#include "core/util.h"
#include "gateway/gateway.h"
#include "gateway/put_batch.h"
#include "gateway/store_cluster.h"
#include "server/commands.h"
#include "server/info.h"
#include "server/networking.h"
#include "server/server.h"
#include "test.h"

/* ---- the fake cluster ---- */

typedef struct fake_read {
    store_key key[8];
    size_t n;
    store_got *got;
    store_got_fn *done;
    void *ctx;
} fake_read;

/* A value the fake "streams" (store_got.stream): sent when the test says. */
typedef struct fake_stream {
    const char *bytes;
    client *c;
    reply_slot *slot;
    int keep_slot;
    void (*done)(void *ctx);
    void *ctx;
} fake_stream;

typedef struct fake {
    store base;
    struct gw_async *ga;
    void (*ga_free)(struct gw_async *ga);
    fake_read reads[16];
    size_t nreads;
    int pins_out;             /* handed out, not yet released */
    fake_stream *sent;        /* the stream cluster_stream_send took */
    gw_write *ships[16];      /* SETs handed over to be put (cluster_stream_finish) */
    size_t nships;
    int puts_open;            /* put_start without put_end/put_abort yet */
    int put_ends;
    /* the keyspace questions asked, each kept until the test answers it */
    int nstats, nscans, nflushes, npins;
    store_pinq *pinq;         /* the pin question asked last */
    store_stat *stat;
    store_page *page;
    store_flushed *flushed;
    uint64_t scan_cursor;
    long scan_count;
    store_got_fn *ks_done;
    void *ks_ctx;
} fake;

static fake *F;

static void fk_get_async(store *s, const store_key *keys, size_t n, int flags, store_got *got,
                         store_got_fn *done, void *ctx) {
    (void)s;
    (void)flags;
    fake_read *r = &F->reads[F->nreads++];
    r->n = n;
    for (size_t i = 0; i < n && i < 8; i++) r->key[i] = keys[i];
    r->got = got;
    r->done = done;
    r->ctx = ctx;
}

static void fk_release(store *s, store_pin *pin) {
    (void)s;
    (void)pin;
    F->pins_out--;
}

static void fk_destroy(store *s) {
    (void)s;
    if (F->ga_free) F->ga_free(F->ga);
}

static int fk_put_start(store *s, const void *key, size_t keylen, uint64_t size, void **dst, store_put **out) {
    (void)s;
    store_put *p = xcalloc(1, sizeof *p + keylen);
    p->buf.ptr = xmalloc(size ? size : 1);
    p->buf.len = size;
    p->keylen = keylen;
    memcpy(p->key, key, keylen);
    *dst = p->buf.ptr;
    *out = p;
    F->puts_open++;
    return STORE_OK;
}

static void put_gone(store_put *p) {
    free(p->buf.ptr);
    free(p);
    F->puts_open--;
}

/* The shipped outcome, as the cluster store's put_end reports it. */
static int fk_put_end(store *s, store_put *p) {
    int rc = p->shipped ? p->ship_rc : STORE_ERR;
    if (rc != STORE_OK) memcpy(s->errstr, p->errstr, sizeof s->errstr);
    F->put_ends++;
    put_gone(p);
    return rc;
}

static void fk_put_abort(store *s, store_put *p) {
    (void)s;
    put_gone(p);
}

static void fk_stat_async(store *s, store_stat *st, store_got_fn *done, void *ctx) {
    (void)s;
    F->nstats++;
    F->stat = st;
    F->ks_done = done;
    F->ks_ctx = ctx;
}

static void fk_scan_async(store *s, uint64_t cursor, long count, store_page *pg, store_got_fn *done, void *ctx) {
    (void)s;
    F->nscans++;
    F->page = pg;
    F->scan_cursor = cursor;
    F->scan_count = count;
    F->ks_done = done;
    F->ks_ctx = ctx;
}

static void fk_flush_async(store *s, store_flushed *f, store_got_fn *done, void *ctx) {
    (void)s;
    F->nflushes++;
    F->flushed = f;
    F->ks_done = done;
    F->ks_ctx = ctx;
}

static void fk_pin_async(store *s, store_pinq *q, store_got_fn *done, void *ctx) {
    (void)s;
    F->npins++;
    F->pinq = q;
    F->ks_done = done;
    F->ks_ctx = ctx;
}

/* The cluster's Memory section, from the stat INFO asked. */
static void fk_info(store *s, const store_stat *st, resp_buf *out, const char *section) {
    (void)s;
    if (!info_wants(section, "memory", 1)) return;
    info_section(out, "Memory");
    if (st && st->rc == STORE_OK) info_field(out, "used_memory", "%llu", (unsigned long long)st->bytes_used);
    else info_field(out, "cluster_memory_unknown", "master unreachable");
}

static const store_ops fake_ops = {.get_async = fk_get_async, .release = fk_release, .destroy = fk_destroy,
                                   .put_start = fk_put_start, .put_end = fk_put_end, .put_abort = fk_put_abort,
                                   .stat_async = fk_stat_async, .scan_async = fk_scan_async,
                                   .flush_async = fk_flush_async, .info = fk_info, .pin_async = fk_pin_async};

/* The pin question asked last is answered: its count, or rc with why. */
static void answer_pin(int rc, uint64_t count, const char *why) {
    F->pinq->rc = rc;
    F->pinq->count = count;
    snprintf(F->pinq->errstr, sizeof F->pinq->errstr, "%s", why);
    F->ks_done(F->ks_ctx);
}

/* The stat asked last is answered: objects (and bytes used, evicted). */
static void answer_stat(uint64_t objects, uint64_t used, long long evicted) {
    *F->stat = (store_stat){.rc = STORE_OK, .objects = objects, .bytes_used = used, .evicted = evicted};
    F->ks_done(F->ks_ctx);
}

/* The page asked last: keys (NULL-terminated), the next cursor. */
static void answer_page(const char *const *keys, uint64_t next) {
    store_key k[16];
    size_t n = 0;
    for (; keys[n]; n++) k[n] = (store_key){keys[n], strlen(keys[n])};
    *F->page = (store_page){.rc = STORE_OK, .next = next, .keys = k, .nkeys = n};
    F->ks_done(F->ks_ctx);
}

/* The question asked last had no answer: the master is unreachable. */
static void answer_none(void) {
    const char *why = "TRYAGAIN the master is unreachable (test)";
    if (F->stat) {
        F->stat->rc = STORE_REFUSED;
        snprintf(F->stat->errstr, sizeof F->stat->errstr, "%s", why);
    }
    if (F->page) {
        F->page->rc = STORE_REFUSED;
        snprintf(F->page->errstr, sizeof F->page->errstr, "%s", why);
    }
    if (F->flushed) {
        F->flushed->rc = STORE_REFUSED;
        snprintf(F->flushed->errstr, sizeof F->flushed->errstr, "%s", why);
    }
    F->ks_done(F->ks_ctx);
}

struct gw_async *cluster_store_async(store *s) { return ((fake *)s)->ga; }

void cluster_store_set_async(store *s, struct gw_async *ga, void (*free_fn)(struct gw_async *ga)) {
    ((fake *)s)->ga = ga;
    ((fake *)s)->ga_free = free_fn;
}

struct master_async *cluster_store_master(store *s) { (void)s; return NULL; }
struct mkv_async *cluster_store_face(store *s) { (void)s; return NULL; }
workers *cluster_store_workers(store *s) { (void)s; return NULL; }
struct put_batcher *cluster_store_puts(store *s) { (void)s; return NULL; }
/* Every SET is "streamed" here: the test ships it when it says. */
int cluster_stream_finish(store *s, struct gw_write *w) {
    (void)s;
    F->ships[F->nships++] = w;
    return 1;
}

/* Ship i is put: outcome rc (errstr why). */
static void shipped(size_t i, int rc, const char *why) {
    gw_write *w = F->ships[i];
    w->put->shipped = 1;
    w->put->ship_rc = rc;
    snprintf(w->put->errstr, sizeof w->put->errstr, "%s", why);
    w->done(w);
}
void cluster_store_removed(store *s, uint64_t n) { (void)s; (void)n; }
void cluster_answer(mkv_client *mc, const char *verb, gw_answer *a, size_t n) { (void)mc; (void)verb; (void)a; (void)n; }

struct get_stream *cluster_stream_send(store *s, store_got *g, client *c, reply_slot *slot, int keep_slot,
                                       const char *key, size_t keylen, void (*done)(void *ctx), void *ctx) {
    (void)s;
    (void)key;
    (void)keylen;
    fake_stream *fs = g->stream;
    g->stream = NULL;
    *fs = (fake_stream){.bytes = fs->bytes, .c = c, .slot = slot, .keep_slot = keep_slot, .done = done, .ctx = ctx};
    F->sent = fs;
    return NULL;   /* no get_stream of get_stream.c behind it */
}

void cluster_got_forget(store *s, store_got *g) {
    if (g->rc == STORE_OK && g->pin) s->ops->release(s, g->pin);
    g->pin = NULL;
    g->stream = NULL;
}

/* Read i completes: outcome k from rc/value (a value is pinned). */
static void got_value(fake_read *r, size_t k, const char *value) {
    store_got *g = &r->got[k];
    g->rc = STORE_OK;
    g->data = value;
    g->len = strlen(value);
    g->pin = (store_pin *)F;   /* any non-NULL: the fake counts */
    g->sl.count = 0;
    g->stream = NULL;
    F->pins_out++;
}

static void got_code(fake_read *r, size_t k, int rc, const char *why) {
    store_got *g = &r->got[k];
    g->rc = rc;
    g->pin = NULL;
    g->stream = NULL;
    snprintf(g->errstr, sizeof g->errstr, "%s", why);
}

/* ---- a server with one client ---- */

static server srv;
static fake fk;
static int peer_fd = -1;

static void stop_cb(event_loop *el, void *data) {
    (void)data;
    loop_stop(el);
}

/* Runs the server's loop for about ms. */
static void pump(int ms) {
    loop_timer *t = loop_timer_create(srv.loop, stop_cb, NULL);
    loop_timer_start(t, ms, 0);
    loop_run(srv.loop);
    loop_timer_free(t);
}

static int setup(void) {
    mkv_config cfg;
    char err[256];
    config_defaults(&cfg);
    if (server_init(&srv, &cfg, err, sizeof err) != 0) return -1;
    fk = (fake){.base = {.ops = &fake_ops}};
    F = &fk;
    srv.store = &fk.base;
    t_server_register(&srv);
    t_object_register(&srv);
    gateway_async_register(&srv);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
    struct sockaddr_storage peer = {.ss_family = AF_UNIX};
    server_adopt(&srv, sv[0], &peer);
    peer_fd = sv[1];
    anet_nonblock(NULL, peer_fd, 1);
    return 0;
}

static void teardown(void) {
    if (peer_fd >= 0) close(peer_fd);
    peer_fd = -1;
    pump(10);
    server_cleanup(&srv);
}

static void send_cmd(const char *resp) {
    size_t n = strlen(resp);
    if (write(peer_fd, resp, n) != (ssize_t)n) printf("# short write\n");
}

/* What the client received within about ms (NUL-terminated). */
static size_t received(char *buf, size_t cap, int ms) {
    size_t len = 0;
    for (int waited = 0; waited <= ms; waited += 10) {
        pump(10);
        ssize_t r;
        while (len + 1 < cap && (r = read(peer_fd, buf + len, cap - 1 - len)) > 0) len += (size_t)r;
    }
    buf[len] = '\0';
    return len;
}

/* Pumps until want arrived (at most 5 s), and compares. */
static int receive_exactly(const char *want) {
    char buf[1 << 17];
    size_t len = 0, n = strlen(want);
    for (int waited = 0; waited < 5000 && len < n; waited += 10) {
        pump(10);
        ssize_t r;
        while (len + 1 < sizeof buf && (r = read(peer_fd, buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)r;
    }
    buf[len] = '\0';
    if (len != n || memcmp(buf, want, n) != 0) {
        printf("# received %zu bytes: %.200s\n", len, buf);
        return 0;
    }
    return 1;
}

/* ---- cases ---- */

/* A GET's reply waits for the cluster, and comes once it answered. */
static void test_get_waits_for_the_cluster(void) {
    ASSERT(setup() == 0);
    send_cmd("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nreads, 1);
    ASSERT_EQ(fk.reads[0].n, 1);
    ASSERT(fk.reads[0].key[0].len == 1 && memcmp(fk.reads[0].key[0].ptr, "k", 1) == 0);
    got_value(&fk.reads[0], 0, "hello");
    fk.reads[0].done(fk.reads[0].ctx);
    ASSERT(receive_exactly("$5\r\nhello\r\n"));
    ASSERT_EQ(fk.pins_out, 0);
    ASSERT_EQ(fk.nreads, 1);   /* answered once: nothing asked again */
    teardown();
}

/* Pipelined GETs all start at once; the second answered first still
 * replies second. */
static void test_pipelined_replies_in_order(void) {
    ASSERT(setup() == 0);
    send_cmd("*2\r\n$3\r\nGET\r\n$1\r\na\r\n*2\r\n$3\r\nGET\r\n$1\r\nb\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nreads, 2);
    got_value(&fk.reads[1], 0, "bee");
    fk.reads[1].done(fk.reads[1].ctx);
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);   /* behind a's open slot */
    got_value(&fk.reads[0], 0, "ay");
    fk.reads[0].done(fk.reads[0].ctx);
    ASSERT(receive_exactly("$2\r\nay\r\n$3\r\nbee\r\n"));
    ASSERT_EQ(fk.pins_out, 0);
    teardown();
}

/* An MGET's elements as GET replies each outcome: a value, a miss, a
 * store failure, a refusal in the store's own words. */
static void test_mget_outcomes(void) {
    ASSERT(setup() == 0);
    send_cmd("*5\r\n$4\r\nMGET\r\n$1\r\nx\r\n$1\r\ny\r\n$1\r\nz\r\n$1\r\nw\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nreads, 1);
    ASSERT_EQ(fk.reads[0].n, 4);
    got_value(&fk.reads[0], 0, "vx");
    got_code(&fk.reads[0], 1, STORE_NOTFOUND, "");
    got_code(&fk.reads[0], 2, STORE_ERR, "node 3 unreachable");
    got_code(&fk.reads[0], 3, STORE_REFUSED, "TRYAGAIN the master is unreachable");
    fk.reads[0].done(fk.reads[0].ctx);
    ASSERT(receive_exactly("*4\r\n$2\r\nvx\r\n$-1\r\n-ERR store failure: node 3 unreachable\r\n"
                           "-TRYAGAIN the master is unreachable\r\n"));
    ASSERT_EQ(fk.pins_out, 0);
    teardown();
}

/* A large value goes out zero-copy: pinned until written, then released. */
static void test_large_value_pinned_until_written(void) {
    ASSERT(setup() == 0);
    static char big[64 * 1024 + 1];
    memset(big, 'v', sizeof big - 1);
    send_cmd("*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    pump(20);
    ASSERT_EQ(fk.nreads, 1);
    got_value(&fk.reads[0], 0, big);
    fk.reads[0].done(fk.reads[0].ctx);
    static char want[sizeof big + 32];
    snprintf(want, sizeof want, "$%zu\r\n%s\r\n", sizeof big - 1, big);
    ASSERT(receive_exactly(want));
    pump(20);
    ASSERT_EQ(fk.pins_out, 0);
    teardown();
}

/* The client leaves before the cluster answered: the answer's pins go
 * back and nothing is written (ASan: no use of the gone client). */
static void test_client_gone_before_the_answer(void) {
    ASSERT(setup() == 0);
    send_cmd("*3\r\n$4\r\nMGET\r\n$1\r\np\r\n$1\r\nq\r\n");
    pump(20);
    ASSERT_EQ(fk.nreads, 1);
    close(peer_fd);
    peer_fd = -1;
    pump(50);   /* the server sees the hang-up and frees the client */
    ASSERT_EQ(srv.nclients, 0);
    got_value(&fk.reads[0], 0, "pp");
    got_value(&fk.reads[0], 1, "qq");
    fk.reads[0].done(fk.reads[0].ctx);
    ASSERT_EQ(fk.pins_out, 0);
    teardown();
}

/* An MGET whose first value the store streams itself (store_got.stream):
 * the array's header goes out at once, the streamed element when its
 * stream wrote it, then the others, in order. */
static void test_streamed_element_in_order(void) {
    ASSERT(setup() == 0);
    send_cmd("*3\r\n$4\r\nMGET\r\n$1\r\ns\r\n$1\r\nt\r\n");
    pump(20);
    ASSERT_EQ(fk.nreads, 1);
    static fake_stream fs = {.bytes = "streamed"};
    fk.reads[0].got[0] = (store_got){.rc = STORE_OK, .len = 8, .stream = &fs};
    got_value(&fk.reads[0], 1, "tt");
    fk.reads[0].done(fk.reads[0].ctx);
    ASSERT(receive_exactly("*2\r\n"));
    ASSERT(fk.sent == &fs);
    ASSERT(fs.keep_slot);   /* an element follows */
    char buf[64];
    ASSERT_EQ(received(buf, sizeof buf, 30), 0);   /* t waits behind the stream */
    client_slot_begin(fs.c, fs.slot);
    reply_bulk(fs.c, fs.bytes, strlen(fs.bytes));
    client_slot_part(fs.c, fs.slot);
    fs.done(fs.ctx);
    ASSERT(receive_exactly("$8\r\nstreamed\r\n$2\r\ntt\r\n"));
    ASSERT_EQ(fk.pins_out, 0);
    teardown();
}

/* A SET's reply waits for its put and is written once from the outcome;
 * the value's bytes were in the put's memory. */
static void test_set_answered_from_its_outcome(void) {
    ASSERT(setup() == 0);
    send_cmd("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nships, 1);
    ASSERT(memcmp(fk.ships[0]->put->buf.ptr, "hello", 5) == 0);
    ASSERT_EQ(fk.put_ends, 0);
    shipped(0, STORE_OK, "");
    ASSERT(receive_exactly("+OK\r\n"));
    ASSERT_EQ(fk.put_ends, 1);
    ASSERT_EQ(fk.puts_open, 0);
    teardown();
}

/* SET ... NX of a stored key is a null reply; a refusal is the store's
 * own words. */
static void test_set_refusals(void) {
    ASSERT(setup() == 0);
    send_cmd("*4\r\n$3\r\nSET\r\n$1\r\na\r\n$2\r\nv1\r\n$2\r\nNX\r\n"
             "*3\r\n$3\r\nSET\r\n$1\r\nb\r\n$2\r\nv2\r\n");
    pump(30);
    ASSERT_EQ(fk.nships, 2);
    shipped(1, STORE_NOSPACE, "NOSPACE the cluster has no room for 2 bytes now");
    shipped(0, STORE_EXISTS, "EXISTS key already exists");
    ASSERT(receive_exactly("$-1\r\n-NOSPACE the cluster has no room for 2 bytes now\r\n"));
    ASSERT_EQ(fk.put_ends, 2);
    ASSERT_EQ(fk.puts_open, 0);
    teardown();
}

/* Two SETs of one key: the second is put only once the first is done, as
 * standalone runs them one after another. */
static void test_sets_of_one_key_in_turn(void) {
    ASSERT(setup() == 0);
    send_cmd("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nx\r\n*3\r\n$3\r\nSET\r\n$1\r\nj\r\n$1\r\ny\r\n");
    pump(30);
    ASSERT_EQ(fk.nships, 2);   /* other keys go together */
    shipped(0, STORE_OK, "");
    shipped(1, STORE_OK, "");
    ASSERT(receive_exactly("+OK\r\n+OK\r\n"));
    /* SETs of k again: the second waits until the first is done */
    send_cmd("*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nz\r\n$2\r\nNX\r\n"
             "*4\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nw\r\n$2\r\nNX\r\n");
    pump(30);
    ASSERT_EQ(fk.nships, 3);   /* the second waits: same key */
    shipped(2, STORE_OK, "");
    pump(30);
    ASSERT_EQ(fk.nships, 4);
    shipped(3, STORE_EXISTS, "EXISTS key already exists");
    ASSERT(receive_exactly("+OK\r\n$-1\r\n"));
    ASSERT_EQ(fk.puts_open, 0);
    teardown();
}

/* DBSIZE waits for the store's stat, asked once, and replies its count;
 * a stat with no answer is an error, never a 0. */
static void test_dbsize_answered_once(void) {
    ASSERT(setup() == 0);
    send_cmd("*1\r\n$6\r\nDBSIZE\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nstats, 1);
    answer_stat(42, 0, 0);
    ASSERT(receive_exactly(":42\r\n"));
    send_cmd("*1\r\n$6\r\nDBSIZE\r\n");
    pump(20);
    ASSERT_EQ(fk.nstats, 2);
    answer_none();
    ASSERT(receive_exactly("-TRYAGAIN the master is unreachable (test)\r\n"));
    ASSERT_EQ(fk.nstats, 2);   /* each DBSIZE asked once: nothing ran again */
    teardown();
}

/* SCAN's pages: the cursor and COUNT go to the store, MATCH filters the
 * page's keys, the next cursor comes back; bad arguments ask nothing. */
static void test_scan_pages(void) {
    ASSERT(setup() == 0);
    send_cmd("*6\r\n$4\r\nSCAN\r\n$1\r\n0\r\n$5\r\nMATCH\r\n$2\r\na*\r\n$5\r\nCOUNT\r\n$1\r\n5\r\n");
    pump(20);
    ASSERT_EQ(fk.nscans, 1);
    ASSERT_EQ(fk.scan_cursor, 0);
    ASSERT_EQ(fk.scan_count, 5);
    static const char *const page1[] = {"a1", "b2", "a3", NULL};
    answer_page(page1, 7);
    ASSERT(receive_exactly("*2\r\n$1\r\n7\r\n*2\r\n$2\r\na1\r\n$2\r\na3\r\n"));
    send_cmd("*2\r\n$4\r\nSCAN\r\n$1\r\n7\r\n");
    pump(20);
    ASSERT_EQ(fk.nscans, 2);
    ASSERT_EQ(fk.scan_cursor, 7);
    static const char *const page2[] = {"b9", NULL};
    answer_page(page2, 0);
    ASSERT(receive_exactly("*2\r\n$1\r\n0\r\n*1\r\n$2\r\nb9\r\n"));
    send_cmd("*2\r\n$4\r\nSCAN\r\n$1\r\nx\r\n");
    ASSERT(receive_exactly("-ERR invalid cursor\r\n"));
    ASSERT_EQ(fk.nscans, 2);
    teardown();
}

/* KEYS walks: the stat first (the bound), then page after page, each
 * asked when the one before came back; one reply of the matches. */
static void test_keys_walk(void) {
    ASSERT(setup() == 0);
    send_cmd("*2\r\n$4\r\nKEYS\r\n$2\r\nk*\r\n");
    pump(20);
    ASSERT_EQ(fk.nstats, 1);
    ASSERT_EQ(fk.nscans, 0);
    answer_stat(3, 0, 0);
    ASSERT_EQ(fk.nscans, 1);
    ASSERT_EQ(fk.scan_cursor, 0);
    static const char *const page1[] = {"k1", "x", NULL};
    answer_page(page1, 5);
    ASSERT_EQ(fk.nscans, 2);
    ASSERT_EQ(fk.scan_cursor, 5);
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 30), 0);   /* not before the walk ended */
    static const char *const page2[] = {"k2", NULL};
    answer_page(page2, 0);
    ASSERT(receive_exactly("*2\r\n$2\r\nk1\r\n$2\r\nk2\r\n"));
    ASSERT_EQ(fk.nstats, 1);
    ASSERT_EQ(fk.nscans, 2);
    /* a keyspace above the bound is refused without a walk */
    send_cmd("*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n");
    pump(20);
    answer_stat(KEYS_MAX + 1, 0, 0);
    ASSERT(receive_exactly("-ERR KEYS is refused on more than 100000 keys (100001 seen): use SCAN with MATCH\r\n"));
    ASSERT_EQ(fk.nscans, 2);
    /* a page with no answer: no partial list */
    send_cmd("*2\r\n$4\r\nKEYS\r\n$1\r\n*\r\n");
    pump(20);
    answer_stat(1, 0, 0);
    fk.stat = NULL;
    fk.flushed = NULL;
    answer_none();
    ASSERT(receive_exactly("-TRYAGAIN the master is unreachable (test)\r\n"));
    teardown();
}

/* INFO asks the stat when a section reads it (Memory, Keyspace, Stats)
 * and builds its reply once from it; INFO server asks nothing. */
static void test_info_from_the_stat(void) {
    ASSERT(setup() == 0);
    send_cmd("*3\r\n$4\r\nINFO\r\n$6\r\nmemory\r\n$8\r\nkeyspace\r\n");
    char buf[4096];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nstats, 1);
    answer_stat(5, 1234, 0);
    size_t n = received(buf, sizeof buf, 50);
    ASSERT(n > 0);
    ASSERT(strstr(buf, "used_memory:1234\r\n") != NULL);
    ASSERT(strstr(buf, "db0:keys=5,") != NULL);
    send_cmd("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n");
    n = received(buf, sizeof buf, 50);
    ASSERT(n > 0 && strstr(buf, "# Server\r\n") != NULL);
    ASSERT_EQ(fk.nstats, 1);
    teardown();
}

/* FLUSHALL asks the store once and says OK, or the store's refusal;
 * arguments it refuses flush nothing. */
static void test_flushall(void) {
    ASSERT(setup() == 0);
    send_cmd("*2\r\n$8\r\nFLUSHALL\r\n$5\r\nbogus\r\n");
    ASSERT(receive_exactly("-ERR syntax error\r\n"));
    ASSERT_EQ(fk.nflushes, 0);
    send_cmd("*1\r\n$8\r\nFLUSHALL\r\n");
    pump(20);
    ASSERT_EQ(fk.nflushes, 1);
    *fk.flushed = (store_flushed){.rc = STORE_OK, .removed = 3};
    fk.ks_done(fk.ks_ctx);
    ASSERT(receive_exactly("+OK\r\n"));
    send_cmd("*2\r\n$7\r\nFLUSHDB\r\n$5\r\nASYNC\r\n");
    pump(20);
    ASSERT_EQ(fk.nflushes, 2);
    fk.stat = NULL;
    fk.page = NULL;
    answer_none();
    ASSERT(receive_exactly("-TRYAGAIN the master is unreachable (test)\r\n"));
    ASSERT_EQ(fk.nflushes, 2);
    teardown();
}

/* A keyspace command behind the connection's GET in flight starts once
 * the GET is done (the fake has no asynchronous master connection, so it
 * does not run ahead) and replies after it; a client gone before the
 * answer gets nothing (ASan: no use of it). */
static void test_keyspace_in_order_and_client_gone(void) {
    ASSERT(setup() == 0);
    send_cmd("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*1\r\n$6\r\nDBSIZE\r\n");
    pump(20);
    ASSERT_EQ(fk.nreads, 1);
    ASSERT_EQ(fk.nstats, 0);
    got_value(&fk.reads[0], 0, "v");
    fk.reads[0].done(fk.reads[0].ctx);
    pump(20);
    ASSERT_EQ(fk.nstats, 1);
    answer_stat(9, 0, 0);
    ASSERT(receive_exactly("$1\r\nv\r\n:9\r\n"));
    ASSERT_EQ(fk.nstats, 1);
    send_cmd("*2\r\n$4\r\nSCAN\r\n$1\r\n0\r\n");
    pump(20);
    ASSERT_EQ(fk.nscans, 1);
    close(peer_fd);
    peer_fd = -1;
    pump(50);
    ASSERT_EQ(srv.nclients, 0);
    static const char *const page[] = {"a", NULL};
    answer_page(page, 0);
    teardown();
}

/* GETRANGE reads its key through get_async, as GET does, and replies the
 * range once from the value; a miss is "", bad numbers ask nothing. */
static void test_getrange_through_the_read(void) {
    ASSERT(setup() == 0);
    send_cmd("*4\r\n$8\r\nGETRANGE\r\n$1\r\nk\r\n$1\r\n1\r\n$2\r\n-2\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.nreads, 1);
    ASSERT_EQ(fk.reads[0].n, 1);
    ASSERT(fk.reads[0].key[0].len == 1 && memcmp(fk.reads[0].key[0].ptr, "k", 1) == 0);
    got_value(&fk.reads[0], 0, "hello");
    fk.reads[0].done(fk.reads[0].ctx);
    ASSERT(receive_exactly("$3\r\nell\r\n"));
    ASSERT_EQ(fk.pins_out, 0);
    send_cmd("*4\r\n$8\r\nGETRANGE\r\n$1\r\nm\r\n$1\r\n0\r\n$2\r\n10\r\n");
    pump(20);
    ASSERT_EQ(fk.nreads, 2);
    got_code(&fk.reads[1], 0, STORE_NOTFOUND, "");
    fk.reads[1].done(fk.reads[1].ctx);
    ASSERT(receive_exactly("$0\r\n\r\n"));
    send_cmd("*4\r\n$8\r\nGETRANGE\r\n$1\r\nk\r\n$1\r\nx\r\n$1\r\n2\r\n");
    ASSERT(receive_exactly("-ERR value is not an integer or out of range\r\n"));
    ASSERT_EQ(fk.nreads, 2);
    teardown();
}

/* MOON.PREFIX asks the store once, with every key, and replies its count
 * when the answer comes, not before; an answer that never came is the
 * store's refusal, whole. */
static void test_prefix_asked_once(void) {
    ASSERT(setup() == 0);
    send_cmd("*4\r\n$11\r\nMOON.PREFIX\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
    char buf[256];
    ASSERT_EQ(received(buf, sizeof buf, 50), 0);
    ASSERT_EQ(fk.npins, 1);
    ASSERT_EQ(fk.pinq->kind, STORE_PQ_PREFIX);
    ASSERT_EQ(fk.pinq->nkeys, 3);
    ASSERT(fk.pinq->keys[2].len == 1 && fk.pinq->keys[2].ptr[0] == 'c');
    answer_pin(STORE_OK, 2, "");
    ASSERT(receive_exactly(":2\r\n"));
    send_cmd("*2\r\n$11\r\nmoon.prefix\r\n$1\r\na\r\n");
    pump(20);
    ASSERT_EQ(fk.npins, 2);
    answer_pin(STORE_REFUSED, 0, "TRYAGAIN the master is unreachable (test)");
    ASSERT(receive_exactly("-TRYAGAIN the master is unreachable (test)\r\n"));
    ASSERT_EQ(fk.npins, 2);
    teardown();
}

/* MOON.PREFIXPIN passes its id, time and keys (not the id and time as
 * keys); bad arguments reply the standalone command's error and ask
 * nothing; MOON.UNPIN passes every id and replies the keys they held; a
 * failure replies in the store's words. */
static void test_pins_asked_and_refused(void) {
    ASSERT(setup() == 0);
    send_cmd("*5\r\n$14\r\nMOON.PREFIXPIN\r\n$2\r\n42\r\n$4\r\n1000\r\n$1\r\na\r\n$1\r\nb\r\n");
    pump(20);
    ASSERT_EQ(fk.npins, 1);
    ASSERT_EQ(fk.pinq->kind, STORE_PQ_PREFIXPIN);
    ASSERT_EQ(fk.pinq->id, 42);
    ASSERT_EQ(fk.pinq->ms, 1000);
    ASSERT_EQ(fk.pinq->nkeys, 2);
    ASSERT(fk.pinq->keys[0].len == 1 && fk.pinq->keys[0].ptr[0] == 'a');
    answer_pin(STORE_OK, 1, "");
    ASSERT(receive_exactly(":1\r\n"));
    send_cmd("*4\r\n$14\r\nMOON.PREFIXPIN\r\n$1\r\n0\r\n$4\r\n1000\r\n$1\r\na\r\n");
    ASSERT(receive_exactly("-ERR pin id must be 1 to 9223372036854775807\r\n"));
    send_cmd("*4\r\n$14\r\nMOON.PREFIXPIN\r\n$1\r\n1\r\n$6\r\n600001\r\n$1\r\na\r\n");
    ASSERT(receive_exactly("-ERR pin time must be 1 to 600000 ms\r\n"));
    send_cmd("*3\r\n$10\r\nMOON.UNPIN\r\n$1\r\n7\r\n$1\r\nx\r\n");
    ASSERT(receive_exactly("-ERR pin id must be 1 to 9223372036854775807\r\n"));
    ASSERT_EQ(fk.npins, 1);   /* refused: nothing asked */
    send_cmd("*3\r\n$10\r\nMOON.UNPIN\r\n$2\r\n42\r\n$2\r\n43\r\n");
    pump(20);
    ASSERT_EQ(fk.npins, 2);
    ASSERT_EQ(fk.pinq->kind, STORE_PQ_UNPIN);
    ASSERT_EQ(fk.pinq->nids, 2);
    ASSERT(fk.pinq->ids[0] == 42 && fk.pinq->ids[1] == 43);
    answer_pin(STORE_OK, 1, "");
    ASSERT(receive_exactly(":1\r\n"));
    send_cmd("*2\r\n$10\r\nMOON.UNPIN\r\n$1\r\n9\r\n");
    pump(20);
    answer_pin(STORE_ERR, 0, "master: ERR no");
    ASSERT(receive_exactly("-ERR store failure: master: ERR no\r\n"));
    teardown();
}

/* A PREFIX behind a SET of its key waits for it (it could count it) and
 * replies after it; one whose client left before the answer writes
 * nothing (ASan: no use of it). */
static void test_prefix_in_order_and_client_gone(void) {
    ASSERT(setup() == 0);
    send_cmd("*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\nv\r\n*2\r\n$11\r\nMOON.PREFIX\r\n$1\r\na\r\n");
    pump(20);
    ASSERT_EQ(fk.nships, 1);
    ASSERT_EQ(fk.npins, 0);
    shipped(0, STORE_OK, "");
    pump(20);
    ASSERT_EQ(fk.npins, 1);
    answer_pin(STORE_OK, 1, "");
    ASSERT(receive_exactly("+OK\r\n:1\r\n"));
    send_cmd("*2\r\n$11\r\nMOON.PREFIX\r\n$1\r\na\r\n");
    pump(20);
    ASSERT_EQ(fk.npins, 2);
    close(peer_fd);
    peer_fd = -1;
    pump(50);
    ASSERT_EQ(srv.nclients, 0);
    answer_pin(STORE_OK, 1, "");
    teardown();
}

int main(void) {
    RUN_TEST(test_get_waits_for_the_cluster);
    RUN_TEST(test_pipelined_replies_in_order);
    RUN_TEST(test_mget_outcomes);
    RUN_TEST(test_large_value_pinned_until_written);
    RUN_TEST(test_client_gone_before_the_answer);
    RUN_TEST(test_streamed_element_in_order);
    RUN_TEST(test_set_answered_from_its_outcome);
    RUN_TEST(test_set_refusals);
    RUN_TEST(test_sets_of_one_key_in_turn);
    RUN_TEST(test_dbsize_answered_once);
    RUN_TEST(test_scan_pages);
    RUN_TEST(test_keys_walk);
    RUN_TEST(test_info_from_the_stat);
    RUN_TEST(test_flushall);
    RUN_TEST(test_keyspace_in_order_and_client_gone);
    RUN_TEST(test_getrange_through_the_read);
    RUN_TEST(test_prefix_asked_once);
    RUN_TEST(test_pins_asked_and_refused);
    RUN_TEST(test_prefix_in_order_and_client_gone);
    return test_failed_cases ? 1 : 0;
}
