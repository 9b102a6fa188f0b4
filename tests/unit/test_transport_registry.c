/* Transport selection by name; this machine has no RDMA device. */
#include <string.h>

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

int main(void) {
    RUN_TEST(test_by_name);
    RUN_TEST(test_rdma_without_device);
    TEST_EXIT();
}
