/* Config table: defaults, JSON files, flags over files, every error. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "server/config.h"
#include "test.h"

static char tmpdir[] = "/tmp/mkv-test-config-XXXXXX";
static char err[512];
static char conf_path[256];   /* the file load() writes */

/* err equals want; prints both on mismatch so a failure is readable. */
static int err_is(const char *want) {
    if (strcmp(err, want) == 0) return 1;
    printf("# got:  %s\n# want: %s\n", err, want);
    return 0;
}

/* err is "config error in <conf_path>: <msg>". */
static int file_err_is(const char *msg) {
    char want[1024];
    snprintf(want, sizeof want, "config error in %s: %s", conf_path, msg);
    return err_is(want);
}

/* Write text to a file in tmpdir; returns its path (static buffer). */
static const char *write_conf(const char *name, const char *text) {
    snprintf(conf_path, sizeof conf_path, "%s/%s", tmpdir, name);
    FILE *f = fopen(conf_path, "w");
    if (!f) return NULL;
    fputs(text, f);
    fclose(f);
    return conf_path;
}

static int load(mkv_config *cfg, const char *text) {
    config_defaults(cfg);
    err[0] = '\0';
    return config_load_file(cfg, write_conf("c.json", text), err, sizeof err);
}

static int args(mkv_config *cfg, int argc, char **argv) {
    config_defaults(cfg);
    err[0] = '\0';
    return config_from_args(cfg, argc, argv, err, sizeof err);
}

static void test_defaults(void) {
    mkv_config c;
    config_defaults(&c);
    ASSERT_EQ(c.role, ROLE_STANDALONE);
    ASSERT_STREQ(c.bind, "127.0.0.1");
    ASSERT_EQ(c.port, 7379);
    ASSERT_EQ(c.segment_size, 512ULL << 20);
    ASSERT_EQ(c.maxclients, 10000);
    ASSERT_EQ(c.proto_max_bulk_len, 512LL << 20);
    ASSERT_EQ(c.heartbeat_ms, 1000);
    ASSERT_EQ(c.node_timeout_ms, 5000);
    ASSERT_EQ(c.put_timeout_ms, 30000);
    ASSERT_EQ(c.lease_ms, 10000);
    ASSERT_EQ(c.stripe_unit, 1ULL << 20);
    ASSERT_EQ(c.stripe_threshold, 4ULL << 20);
    ASSERT_EQ(c.stripe_width, 2);
    ASSERT_EQ(c.replicas, 1);
    ASSERT_STREQ(c.transport, "auto");
    ASSERT_EQ(c.client_output_limit, 256ULL << 20);
}

static void test_file_values(void) {
    mkv_config c;
    ASSERT_EQ(load(&c, "{\"role\":\"gateway\",\"port\":7400,\"segment_size\":\"4GB\","
                       "\"log_level\":\"warning\",\"data_addrs\":[\"a:1\",\"b:2\"],"
                       "\"transport\":\"tcp\",\"prefault\":false,\"slice_size\":65536}"),
              0);
    ASSERT_EQ(c.role, ROLE_GATEWAY);
    ASSERT_EQ(c.port, 7400);
    ASSERT_EQ(c.segment_size, 4ULL << 30);
    ASSERT_EQ(c.log_level, LOG_WARNING);
    ASSERT_EQ(c.ndata_addrs, 2);
    ASSERT_STREQ(c.data_addrs[1], "b:2");
    ASSERT_STREQ(c.transport, "tcp");
    ASSERT_EQ(c.prefault, 0);
    ASSERT_EQ(c.stripe_unit, 65536);   /* slice_size: its old name */
}

static void test_sizes(void) {
    mkv_config c;
    char *a1[] = {"--segment-size", "512MB"};
    ASSERT_EQ(args(&c, 2, a1), 0);
    ASSERT_EQ(c.segment_size, 512ULL << 20);
    char *a2[] = {"--segment-size=64MiB", "--proto-max-bulk-len", "1GB"};
    ASSERT_EQ(args(&c, 3, a2), 0);
    ASSERT_EQ(c.segment_size, 64ULL << 20);
    ASSERT_EQ(c.proto_max_bulk_len, 1LL << 30);
    char *a3[] = {"--segment-size", "12XB"};
    ASSERT_EQ(args(&c, 2, a3), -1);
    ASSERT(err_is("config error: '--segment-size' must be a size such as 512MB or 4GB"));
    char *a4[] = {"--segment-size", "1KB"};
    ASSERT_EQ(args(&c, 2, a4), -1);
    ASSERT(strstr(err, "'--segment-size' must be between 1048576 and") != NULL);
}

static void test_flags_win_over_file(void) {
    mkv_config c;
    const char *path = write_conf("f.json", "{\"port\":7500,\"bind\":\"0.0.0.0\",\"maxclients\":5}");
    char p[128];
    snprintf(p, sizeof p, "%s", path);
    /* The flag comes before --config and still wins. */
    char *a[] = {"--port", "7600", "--config", p, "--role", "master", "--data-addrs", "x:1,y:2,z:3"};
    ASSERT_EQ(args(&c, 8, a), 0);
    ASSERT_EQ(c.port, 7600);
    ASSERT_STREQ(c.bind, "0.0.0.0");
    ASSERT_EQ(c.maxclients, 5);
    ASSERT_EQ(c.role, ROLE_MASTER);
    ASSERT_EQ(c.ndata_addrs, 3);
    ASSERT_STREQ(c.data_addrs[2], "z:3");
    ASSERT(strcmp(c.config_file, p) == 0);
}

static void test_file_errors(void) {
    mkv_config c;
    ASSERT_EQ(load(&c, "{\"port\":7379,\"colour\":\"blue\"}"), -1);
    ASSERT(file_err_is("unknown key 'colour'"));

    ASSERT_EQ(load(&c, "{\"port\":\"fast\"}"), -1);
    ASSERT(file_err_is("'port' must be an integer"));

    ASSERT_EQ(load(&c, "{\"port\":1.5}"), -1);
    ASSERT(file_err_is("'port' must be an integer"));

    /* beyond long long: refused, not cast (undefined; found by fuzz_config) */
    ASSERT_EQ(load(&c, "{\"lease_ms\":1e111}"), -1);
    ASSERT(file_err_is("'lease_ms' must be an integer"));
    ASSERT_EQ(load(&c, "{\"port\":-9.3e18}"), -1);
    ASSERT(file_err_is("'port' must be an integer"));

    ASSERT_EQ(load(&c, "{\"port\":70000}"), -1);
    ASSERT(file_err_is("'port' must be between 0 and 65535 (got 70000)"));

    ASSERT_EQ(load(&c, "{\"bind\":5}"), -1);
    ASSERT(file_err_is("'bind' must be a string"));

    ASSERT_EQ(load(&c, "{\"role\":\"boss\"}"), -1);
    ASSERT(file_err_is("'role' must be one of standalone, master, node, gateway"));

    ASSERT_EQ(load(&c, "{\"segment_size\":\"lots\"}"), -1);
    ASSERT(file_err_is("'segment_size' must be a size such as 512MB or 4GB"));

    ASSERT_EQ(load(&c, "{\"prefault\":\"maybe\"}"), -1);
    ASSERT(file_err_is("'prefault' must be yes or no"));

    ASSERT_EQ(load(&c, "{\"log_level\":\"loud\"}"), -1);
    ASSERT(file_err_is("'log_level' must be one of debug, verbose, notice, warning, nothing"));

    ASSERT_EQ(load(&c, "{\"data_addrs\":[1]}"), -1);
    ASSERT(file_err_is("'data_addrs' must be a list of \"host:port\" strings"));

    ASSERT_EQ(load(&c, "[1,2]"), -1);
    ASSERT(file_err_is("the top level must be a JSON object"));
}

static void test_bad_json_position(void) {
    mkv_config c;
    ASSERT_EQ(load(&c, "{\n  \"port\": 7379,\n  \"bind\" \"x\"\n}"), -1);
    ASSERT(file_err_is("invalid JSON at line 3 column 10"));
}

static void test_unreadable_file(void) {
    mkv_config c;
    config_defaults(&c);
    ASSERT_EQ(config_load_file(&c, "/nonexistent/moonkv.json", err, sizeof err), -1);
    ASSERT(err_is("config error: cannot read '/nonexistent/moonkv.json': No such file or directory"));
    char *a[] = {"--config", "/nonexistent/moonkv.json"};
    ASSERT_EQ(args(&c, 2, a), -1);
    ASSERT(err_is("config error: cannot read '/nonexistent/moonkv.json': No such file or directory"));
}

static void test_flag_errors(void) {
    mkv_config c;
    char *a1[] = {"--colour", "blue"};
    ASSERT_EQ(args(&c, 2, a1), -1);
    ASSERT(err_is("config error: unknown option '--colour' (see --help)"));
    char *a2[] = {"--port"};
    ASSERT_EQ(args(&c, 1, a2), -1);
    ASSERT(err_is("config error: '--port' needs a value"));
    char *a3[] = {"7379"};
    ASSERT_EQ(args(&c, 1, a3), -1);
    ASSERT(err_is("config error: unexpected argument '7379' (flags look like --port 7379)"));
    char *a4[] = {"--maxclients", "0"};
    ASSERT_EQ(args(&c, 2, a4), -1);
    ASSERT(err_is("config error: '--maxclients' must be between 1 and 1000000 (got 0)"));
    char *a5[] = {"--heartbeat-ms", "10x"};
    ASSERT_EQ(args(&c, 2, a5), -1);
    ASSERT(err_is("config error: '--heartbeat-ms' must be an integer"));
    char *a6[] = {"--data-addrs", "a:1,"};
    ASSERT_EQ(args(&c, 2, a6), -1);
    ASSERT(err_is("config error: '--data-addrs' has an empty address"));
}

static void test_config_get(void) {
    mkv_config c;
    char buf[512];
    config_defaults(&c);
    ASSERT_STREQ(config_get_value(&c, "segment-size", buf, sizeof buf), "536870912");
    ASSERT_STREQ(config_get_value(&c, "maxclients", buf, sizeof buf), "10000");
    ASSERT_STREQ(config_get_value(&c, "role", buf, sizeof buf), "standalone");
    ASSERT_STREQ(config_get_value(&c, "log_level", buf, sizeof buf), "notice");
    ASSERT(config_get_value(&c, "colour", buf, sizeof buf) == NULL);
    int found = 0;
    for (int i = 0; config_key_name(i); i++)
        if (strcmp(config_key_name(i), "proto-max-bulk-len") == 0) found = 1;
    ASSERT(found);
}

int main(void) {
    if (!mkdtemp(tmpdir)) return 1;
    RUN_TEST(test_defaults);
    RUN_TEST(test_file_values);
    RUN_TEST(test_sizes);
    RUN_TEST(test_flags_win_over_file);
    RUN_TEST(test_file_errors);
    RUN_TEST(test_bad_json_position);
    RUN_TEST(test_unreadable_file);
    RUN_TEST(test_flag_errors);
    RUN_TEST(test_config_get);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
    if (system(cmd) != 0) return 1;
    TEST_EXIT();
}
