/* The transport registry: client transports and node data servers by
 * name (on a machine without an RDMA device the rdma cases check the
 * refusal instead), and the address schemes the engine routes by. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "transports/registry.h"

static void test_by_name(void) {
    te_config cfg = { 0 };
    char err[256];
    const char *names[] = { "tcp", "shm" };
    for (int i = 0; i < 2; i++) {
        te_transport *t = te_transport_create(names[i], &cfg, err, sizeof err);
        ASSERT(t != NULL);
        ASSERT_STREQ(t->ops->name, names[i]);
        ASSERT_EQ(t->cfg.window, 64);
        t->ops->destroy(t);
    }
    ASSERT(te_transport_create("carrier-pigeon", &cfg, err, sizeof err) == NULL);
    ASSERT(strstr(err, "unknown transport") != NULL);
}

static void test_rdma_without_device(void) {
    te_config cfg = { 0 };
    char err[256];
    te_transport *t = te_transport_create("rdma", &cfg, err, sizeof err);
    if (t) {   /* a machine with a device: nothing to check here */
        t->ops->destroy(t);
        return;
    }
    ASSERT(strstr(err, "rdma") != NULL || strstr(err, "RDMA") != NULL);
    t = te_transport_create("auto", &cfg, err, sizeof err);
    ASSERT(t != NULL);
    ASSERT_STREQ(t->ops->name, "tcp");
    t->ops->destroy(t);
}

/* "auto" without a device says so in one log line per process, however
 * many engines (a gateway makes one per worker) are created. */
static void test_fallback_logged_once(void) {
    te_config cfg = { 0 };
    char err[256], path[] = "/tmp/moonkv-registry-log-XXXXXX";
    int fd = mkstemp(path);
    ASSERT(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    ASSERT(saved >= 0 && dup2(fd, 2) == 2);
    int fell_back = 0;
    for (int i = 0; i < 3; i++) {
        te_transport *t = te_transport_create("auto", &cfg, err, sizeof err);
        if (t && strcmp(t->ops->name, "tcp") == 0) fell_back++;
        if (t) t->ops->destroy(t);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fdopen(fd, "r");
    ASSERT(f != NULL);
    rewind(f);
    char line[512];
    int said = 0;
    while (fgets(line, sizeof line, f)) said += strstr(line, "no usable device") != NULL;
    fclose(f);
    unlink(path);
    if (fell_back == 0) return;   /* a machine with a device: nothing to say */
    ASSERT_EQ(fell_back, 3);
    ASSERT_EQ(said, 1);
}

static void test_schemes(void) {
    ASSERT_EQ(te_addr_scheme_len("unix:@moonkv-node-7"), 4);
    ASSERT_EQ(te_addr_scheme_len("unix:/tmp/x.sock"), 4);
    ASSERT_EQ(te_addr_scheme_len("rdma:10.0.0.1:7001"), 4);
    ASSERT_EQ(te_addr_scheme_len("127.0.0.1:7000"), 0);
    ASSERT_EQ(te_addr_scheme_len("localhost:7000"), 0);   /* a host, not a scheme */
    ASSERT_EQ(te_addr_scheme_len("node1:7000"), 0);
    ASSERT_EQ(te_addr_scheme_len(":7000"), 0);
    ASSERT_EQ(te_addr_scheme_len("nocolon"), 0);
    /* every client transport says what it routes */
    te_config cfg = { 0 };
    char err[256];
    te_transport *tcp = te_transport_create("tcp", &cfg, err, sizeof err);
    te_transport *shm = te_transport_create("shm", &cfg, err, sizeof err);
    ASSERT(tcp && shm);
    ASSERT(tcp->ops->scheme == NULL && !tcp->ops->same_host && tcp->ops->path_node_id == NULL);
    ASSERT_STREQ(shm->ops->scheme, "unix");
    ASSERT(shm->ops->same_host && shm->ops->path_node_id != NULL);
    tcp->ops->destroy(tcp);
    shm->ops->destroy(shm);
}

static int names_of(const char *transport, char *out, size_t outlen, char *err, size_t errlen) {
    const te_data_server_ops *ops[TE_MAX_DATA_SERVERS];
    int n = te_data_servers_for(transport, ops, TE_MAX_DATA_SERVERS, err, errlen);
    out[0] = '\0';
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), outlen - strlen(out), "%s%s", i ? "," : "", ops[i]->name);
    return n;
}

static void test_data_servers(void) {
    char got[64], err[256];
    ASSERT_EQ(names_of("tcp", got, sizeof got, err, sizeof err), 1);
    ASSERT_STREQ(got, "tcp");
    ASSERT_EQ(names_of("shm", got, sizeof got, err, sizeof err), 2);
    ASSERT_STREQ(got, "tcp,shm");
    int n = names_of("auto", got, sizeof got, err, sizeof err);
    ASSERT(n == 2 || n == 3);
    ASSERT_STREQ(got, n == 3 ? "tcp,shm,rdma" : "tcp,shm");
    ASSERT_EQ(names_of("", got, sizeof got, err, sizeof err), n);   /* "" is auto */
    if (n == 3) {
        ASSERT_EQ(names_of("rdma", got, sizeof got, err, sizeof err), 2);
        ASSERT_STREQ(got, "tcp,rdma");
    } else {
        ASSERT_EQ(names_of("rdma", got, sizeof got, err, sizeof err), -1);
        ASSERT(strstr(err, "--transport rdma") != NULL);
    }
    ASSERT_EQ(names_of("carrier-pigeon", got, sizeof got, err, sizeof err), -1);
    ASSERT(strstr(err, "unknown transport 'carrier-pigeon'") != NULL);
    const te_data_server_ops *two[2];
    ASSERT_EQ(te_data_servers_for("auto", two, 2, err, sizeof err), -1);   /* no room: refused, not cut */
}

int main(void) {
    RUN_TEST(test_fallback_logged_once);   /* first: nothing logged before it */
    RUN_TEST(test_by_name);
    RUN_TEST(test_rdma_without_device);
    RUN_TEST(test_schemes);
    RUN_TEST(test_data_servers);
    TEST_EXIT();
}
