/* test_preauth_gate - the admission of unauthenticated data-plane
 * connections (backend/preauth_gate.h): caps in total and per source,
 * the oldest pushed out first, authenticated connections left alone. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/preauth_gate.h"
#include "test.h"

#define MAXC 64

typedef struct peer {
    int ours, theirs;          /* the gate's end, the peer's end */
    uint64_t ticket;
} peer;

static struct sockaddr_in src(int last_octet) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)(40000 + last_octet))};
    char ip[32];
    snprintf(ip, sizeof ip, "10.0.0.%d", last_octet);
    inet_pton(AF_INET, ip, &a.sin_addr);
    return a;
}

static int open_peer(te_gate *g, peer *p, int source) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) return -1;
    p->ours = sv[0];
    p->theirs = sv[1];
    struct sockaddr_in a = src(source);
    p->ticket = te_gate_admit(g, p->ours, (struct sockaddr *)&a, sizeof a);
    return p->ticket ? 0 : -1;
}

/* 1 if the gate shut the connection down (the peer sees end of stream). */
static int was_dropped(const peer *p) {
    char b;
    return recv(p->theirs, &b, 1, MSG_DONTWAIT) == 0;
}

static void close_peer(peer *p) {
    close(p->ours);
    close(p->theirs);
}

static void test_total_cap_drops_the_oldest_first(void) {
    te_gate *g = te_gate_create(8, 8);
    peer p[12];
    /* eight sources so the per-source cap never bites */
    for (int i = 0; i < 12; i++) ASSERT(open_peer(g, &p[i], 1 + i % 8) == 0);
    for (int i = 0; i < 4; i++) ASSERT_MSG(was_dropped(&p[i]), "connection %d kept", i);
    for (int i = 4; i < 12; i++) ASSERT_MSG(!was_dropped(&p[i]), "connection %d dropped", i);
    te_gate_stats st;
    te_gate_get_stats(g, &st);
    ASSERT_EQ(st.pending, 8);
    ASSERT_EQ(st.evicted, 4);
    ASSERT_EQ(te_gate_passed(g, p[0].ticket), -1);   /* evicted: must be dropped */
    ASSERT_EQ(te_gate_passed(g, p[11].ticket), 0);
    for (int i = 0; i < 12; i++) close_peer(&p[i]);
    te_gate_destroy(g);
}

static void test_per_source_cap_spares_other_sources(void) {
    te_gate *g = te_gate_create(MAXC, 4);
    peer a[4], b[10];
    for (int i = 0; i < 4; i++) ASSERT(open_peer(g, &a[i], 1) == 0);
    for (int i = 0; i < 10; i++) ASSERT(open_peer(g, &b[i], 2) == 0);   /* a flood from 10.0.0.2 */
    for (int i = 0; i < 4; i++) ASSERT_MSG(!was_dropped(&a[i]), "10.0.0.1 #%d dropped", i);
    for (int i = 0; i < 6; i++) ASSERT_MSG(was_dropped(&b[i]), "10.0.0.2 #%d kept", i);
    for (int i = 6; i < 10; i++) ASSERT(!was_dropped(&b[i]));
    te_gate_stats st;
    te_gate_get_stats(g, &st);
    ASSERT_EQ(st.pending, 8);
    for (int i = 0; i < 4; i++) close_peer(&a[i]);
    for (int i = 0; i < 10; i++) close_peer(&b[i]);
    te_gate_destroy(g);
}

/* A member that authenticated leaves the pool: no flood can drop it. */
static void test_authenticated_are_never_pushed_out(void) {
    te_gate *g = te_gate_create(4, 4);
    peer m, f[40];
    ASSERT(open_peer(g, &m, 9) == 0);
    ASSERT_EQ(te_gate_passed(g, m.ticket), 0);
    for (int i = 0; i < 40; i++) ASSERT(open_peer(g, &f[i], 9) == 0);
    ASSERT(!was_dropped(&m));
    /* a newcomer always gets a slot: the latest flood connections are in */
    for (int i = 36; i < 40; i++) ASSERT(!was_dropped(&f[i]));
    te_gate_stats st;
    te_gate_get_stats(g, &st);
    ASSERT_EQ(st.pending, 4);
    ASSERT_EQ(st.evicted, 36);
    close_peer(&m);
    for (int i = 0; i < 40; i++) close_peer(&f[i]);
    te_gate_destroy(g);
}

static void test_failed_handshakes_free_their_slot(void) {
    te_gate *g = te_gate_create(2, 2);
    peer p[3];
    ASSERT(open_peer(g, &p[0], 1) == 0);
    ASSERT(open_peer(g, &p[1], 1) == 0);
    te_gate_failed(g, p[0].ticket, "bad proof");
    ASSERT(open_peer(g, &p[2], 1) == 0);   /* fits in the freed slot */
    ASSERT(!was_dropped(&p[1]) && !was_dropped(&p[2]));
    te_gate_stats st;
    te_gate_get_stats(g, &st);
    ASSERT_EQ(st.failed, 1);
    ASSERT_EQ(st.evicted, 0);
    te_gate_refused(g, "max_conns");
    te_gate_get_stats(g, &st);
    ASSERT_EQ(st.refused, 1);
    for (int i = 0; i < 3; i++) close_peer(&p[i]);
    te_gate_destroy(g);
}

int main(void) {
    RUN_TEST(test_total_cap_drops_the_oldest_first);
    RUN_TEST(test_per_source_cap_spares_other_sources);
    RUN_TEST(test_authenticated_are_never_pushed_out);
    RUN_TEST(test_failed_handshakes_free_their_slot);
    TEST_EXIT();
}
