/* tests/unit/test_anet.c - listen on port 0, connect, names and options;
 * the error texts callers build on, to the letter. */
#include "core/anet.h"
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static void test_listen_port0_connect(void) {
    char err[ANET_ERR_LEN] = "", peer[64], local[64], accepted[64];
    int lfd = anet_tcp_server(err, "127.0.0.1", 0, 16, 0), port = 0;
    ASSERT_MSG(lfd >= 0, "listen: %s", err);
    ASSERT_EQ(anet_sock_port(err, lfd, &port), ANET_OK);
    ASSERT(port > 0 && port < 65536);
    int fd = anet_tcp_connect(err, "127.0.0.1", port, NULL, 0, 2000);
    ASSERT_MSG(fd >= 0, "connect: %s", err);
    ASSERT(fcntl(fd, F_GETFL) & O_NONBLOCK);
    ASSERT(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    int afd = accept(lfd, NULL, NULL);
    ASSERT(afd >= 0);
    ASSERT_EQ(anet_peer_name(err, fd, peer, sizeof peer), ANET_OK);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", port);
    ASSERT_STREQ(peer, want);
    /* The two ends agree on each other's names. */
    ASSERT_EQ(anet_sock_name(err, fd, local, sizeof local), ANET_OK);
    ASSERT_EQ(anet_peer_name(err, afd, accepted, sizeof accepted), ANET_OK);
    ASSERT_STREQ(local, accepted);
    ASSERT(write(fd, "x", 1) == 1);
    char c = 0;
    ASSERT(read(afd, &c, 1) == 1 && c == 'x');
    close(afd);
    close(fd);
    close(lfd);
}

static void test_options(void) {
    char err[ANET_ERR_LEN];
    int lfd = anet_tcp_server(err, "127.0.0.1", 0, 16, 1), port, v;
    socklen_t sl = sizeof v;
    ASSERT(lfd >= 0);
    ASSERT(fcntl(lfd, F_GETFL) & O_NONBLOCK);
    ASSERT_EQ(anet_nonblock(err, lfd, 0), ANET_OK);
    ASSERT(!(fcntl(lfd, F_GETFL) & O_NONBLOCK));
    anet_sock_port(err, lfd, &port);
    int fd = anet_tcp_connect(err, "localhost", port, "127.0.0.1", 0, 2000);
    ASSERT_MSG(fd >= 0, "connect: %s", err);
    ASSERT_EQ(anet_nodelay(err, fd), ANET_OK);
    ASSERT(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &v, &sl) == 0 && v == 1);
    ASSERT_EQ(anet_keepalive(err, fd, 30), ANET_OK);
    ASSERT(getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &v, &sl) == 0 && v == 1);
    ASSERT(getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &v, &sl) == 0 && v == 30);
    ASSERT(getsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &v, &sl) == 0 && v == 10);
    ASSERT_EQ(anet_nodelay(err, -1), ANET_ERR);
    ASSERT_STREQ(err, "Bad file descriptor");
    close(fd);
    close(lfd);
}

static void test_port_in_use(void) {
    char err[ANET_ERR_LEN] = "";
    int lfd = anet_tcp_server(err, "127.0.0.1", 0, 16, 0), port;
    ASSERT(lfd >= 0);
    anet_sock_port(err, lfd, &port);
    ASSERT_EQ(anet_tcp_server(err, "127.0.0.1", port, 16, 0), ANET_ERR);
    ASSERT_STREQ(err, "Address already in use");
    /* A source address already taken by a listener. */
    ASSERT_EQ(anet_tcp_connect(err, "127.0.0.1", port, "127.0.0.1", port, 2000), ANET_ERR);
    ASSERT_STREQ(err, "source address: Address already in use");
    close(lfd);
    /* Nobody listens there now. */
    ASSERT_EQ(anet_tcp_connect(err, "127.0.0.1", port, NULL, 0, 2000), ANET_ERR);
    ASSERT_STREQ(err, "Connection refused");
}

/* The text is getaddrinfo's own for the same name (which of its errors a
 * resolver gives depends on the machine's DNS). */
static void test_bad_host_and_port(void) {
    const char *host = "no-such-host.invalid";
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(host, "80", &hints, &res);
    ASSERT(rc != 0);
    char err[ANET_ERR_LEN] = "";
    ASSERT_EQ(anet_tcp_connect(err, host, 80, NULL, 0, 2000), ANET_ERR);
    ASSERT_STREQ(err, gai_strerror(rc));
    ASSERT_EQ(anet_tcp_server(err, host, 0, 16, 0), ANET_ERR);
    ASSERT_STREQ(err, gai_strerror(rc));
    ASSERT_EQ(anet_tcp_server(err, "127.0.0.1", 70000, 16, 0), ANET_ERR);
    ASSERT_STREQ(err, "bad port 70000");
    ASSERT_EQ(anet_tcp_connect(err, "127.0.0.1", -1, NULL, 0, 2000), ANET_ERR);
    ASSERT_STREQ(err, "bad port -1");
}

/* A listener whose accept queue is full drops further SYNs: the attempt
 * ends at the timeout, with the timeout's text. */
static void test_connect_timeout(void) {
    char err[ANET_ERR_LEN] = "";
    int lfd = anet_tcp_server(err, "127.0.0.1", 0, 0, 0), port, held[8], nheld = 0, fd = -1;
    ASSERT(lfd >= 0);
    anet_sock_port(err, lfd, &port);
    long ms = 0;
    while (nheld < 8) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        fd = anet_tcp_connect(err, "127.0.0.1", port, NULL, 0, 300);
        clock_gettime(CLOCK_MONOTONIC, &b);
        ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000;
        if (fd < 0) break;
        held[nheld++] = fd;
    }
    for (int i = 0; i < nheld; i++) close(held[i]);
    close(lfd);
    ASSERT_MSG(fd == ANET_ERR, "8 connections into a queue of 1");
    ASSERT_STREQ(err, "Connection timed out");
    ASSERT_MSG(ms >= 250 && ms < 2000, "took %ld ms", ms);
}

static void test_unix(void) {
    char err[ANET_ERR_LEN] = "", path[64];
    snprintf(path, sizeof path, "/tmp/test_anet.%d.sock", (int)getpid());
    int lfd = anet_unix_server(err, path, 4);
    ASSERT_MSG(lfd >= 0, "unix listen: %s", err);
    struct stat st;
    ASSERT(stat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 077) == 0);
    int fd = anet_unix_connect(err, path);
    ASSERT_MSG(fd >= 0, "unix connect: %s", err);
    close(fd);
    close(lfd);
    unlink(path);
    ASSERT_EQ(anet_unix_connect(err, path), ANET_ERR);
    ASSERT_STREQ(err, "No such file or directory");
    /* Abstract names leave no file. */
    char name[64];
    snprintf(name, sizeof name, "@test_anet.%d", (int)getpid());
    lfd = anet_unix_server(err, name, 4);
    ASSERT(lfd >= 0);
    fd = anet_unix_connect(err, name);
    ASSERT(fd >= 0);
    close(fd);
    close(lfd);
    ASSERT_EQ(anet_unix_server(err, "", 4), ANET_ERR);
    ASSERT_STREQ(err, "bad unix socket path");
}

int main(void) {
    RUN_TEST(test_listen_port0_connect);
    RUN_TEST(test_options);
    RUN_TEST(test_port_in_use);
    RUN_TEST(test_bad_host_and_port);
    RUN_TEST(test_connect_timeout);
    RUN_TEST(test_unix);
    TEST_EXIT();
}
