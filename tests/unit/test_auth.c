/* Peer authentication over socketpairs: accept, refuse both ways,
 * timeouts, garbage and a reflected answer. */
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/auth.h"
#include "backend/netio.h"
#include "core/util.h"
#include "test.h"

typedef struct side {
    int fd;
    const char *secret;
    int rc;
    char err[128];
} side;

static void *server_main(void *arg) {
    side *s = arg;
    s->rc = te_auth_server(s->fd, s->secret, 1000, s->err, sizeof s->err);
    return NULL;
}

/* Runs server on one end in a thread and the client on the other. */
static void run_pair(const char *csecret, const char *ssecret, side *c, side *s) {
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    *c = (side){ .fd = sv[0], .secret = csecret };
    *s = (side){ .fd = sv[1], .secret = ssecret };
    pthread_t th;
    pthread_create(&th, NULL, server_main, s);
    c->rc = te_auth_client(c->fd, c->secret, 1000, c->err, sizeof c->err);
    pthread_join(th, NULL);
    close(sv[0]);
    close(sv[1]);
}

static void test_right_secret(void) {
    side c, s;
    run_pair("s3cret", "s3cret", &c, &s);
    ASSERT_EQ(c.rc, TE_AUTH_OK);
    ASSERT_EQ(s.rc, TE_AUTH_OK);
}

static void test_wrong_secret(void) {
    side c, s;
    run_pair("s3cret", "other", &c, &s);
    ASSERT_EQ(c.rc, TE_AUTH_REFUSED);   /* reached and refused: not an unreachable peer */
    ASSERT(strstr(c.err, "bad secret") != NULL);
    /* The client stops before answering: the server sees it go away. */
    ASSERT_EQ(s.rc, TE_AUTH_ERR);
    run_pair("", "s3cret", &c, &s);
    ASSERT_EQ(c.rc, TE_AUTH_REFUSED);
    ASSERT_EQ(s.rc, TE_AUTH_ERR);
}

static void test_silent_peer_times_out(void) {
    int sv[2];
    char err[128];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    uint64_t t0 = mono_ms();
    ASSERT_EQ(te_auth_client(sv[0], "x", 200, err, sizeof err), TE_AUTH_ERR);
    ASSERT(strstr(err, "timed out") != NULL);
    ASSERT_EQ(te_auth_server(sv[1], "x", 200, err, sizeof err), TE_AUTH_ERR);
    ASSERT(strstr(err, "timed out") != NULL);
    ASSERT(mono_ms() - t0 < 2000);
    close(sv[0]);
    close(sv[1]);
}

static void test_garbage_peer(void) {
    int sv[2];
    char err[128];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    char junk[64];
    memset(junk, 'G', sizeof junk);
    ASSERT_EQ(write(sv[1], junk, sizeof junk), (ssize_t)sizeof junk);
    ASSERT_EQ(te_auth_server(sv[0], "x", 500, err, sizeof err), TE_AUTH_ERR);
    ASSERT(strstr(err, "does not speak") != NULL);
    ASSERT_EQ(te_auth_client(sv[0], "x", 500, err, sizeof err), TE_AUTH_REFUSED);
    close(sv[1]);
    ASSERT_EQ(te_auth_client(sv[0], "x", 500, err, sizeof err), TE_AUTH_ERR);
    ASSERT(strstr(err, "closed") != NULL || strstr(err, "Broken") != NULL);
    close(sv[0]);
}

/* An attacker without the secret sends the server's own answer back as
 * its answer: the direction label makes it fail. */
static void test_reflected_answer_refused(void) {
    side s;
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
    s = (side){ .fd = sv[1], .secret = "s3cret" };
    pthread_t th;
    pthread_create(&th, NULL, server_main, &s);
    uint8_t hello[21] = { 'M', 'K', 'V', 'A', 1 }, reply[37], verdict = 9;
    memset(hello + 5, 0xab, 16);
    ASSERT_EQ(te_write_full(sv[0], hello, sizeof hello, 0), 0);
    ASSERT_EQ(te_read_full(sv[0], reply, sizeof reply, 0), 0);
    ASSERT_EQ(te_write_full(sv[0], reply + 21, 16, 0), 0);
    ASSERT_EQ(te_read_full(sv[0], &verdict, 1, 0), 0);
    pthread_join(th, NULL);
    ASSERT_EQ(verdict, 0);
    ASSERT_EQ(s.rc, TE_AUTH_ERR);
    close(sv[0]);
    close(sv[1]);
}

int main(void) {
    RUN_TEST(test_right_secret);
    RUN_TEST(test_wrong_secret);
    RUN_TEST(test_silent_peer_times_out);
    RUN_TEST(test_garbage_peer);
    RUN_TEST(test_reflected_answer_refused);
    TEST_EXIT();
}
