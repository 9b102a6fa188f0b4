/* Unit tests of src/proto/slots: a key's slot is Redis Cluster's (CRC16
 * XMODEM check value, known keys' slots, hash tags); the slot map's text
 * parses, formats back and refuses what breaks its rules; assigning
 * ranges; where each MOON.* verb keeps its keys; the MOVED error's text
 * round trip and the status word. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto/slots.h"
#include "proto/status.h"
#include "test.h"

static void test_key_slot(void) {
    ASSERT_EQ(proto_crc16("123456789", 9), 0x31C3);   /* XMODEM's check value */
    /* slots Redis Cluster gives these keys (CLUSTER KEYSLOT) */
    ASSERT_EQ(proto_key_slot("foo", 3), 12182);
    ASSERT_EQ(proto_key_slot("bar", 3), 5061);
    ASSERT_EQ(proto_key_slot("{user1000}.following", 20), proto_key_slot("user1000", 8));
    ASSERT_EQ(proto_key_slot("{user1000}.followers", 20), proto_key_slot("user1000", 8));
    ASSERT_EQ(proto_key_slot("foo{}{bar}", 10), proto_crc16("foo{}{bar}", 10) % PROTO_SLOTS);   /* empty tag: whole key */
    ASSERT_EQ(proto_key_slot("foo{{bar}}zap", 13), proto_key_slot("{bar", 4));
    ASSERT_EQ(proto_key_slot("foo{bar}{zap}", 13), proto_key_slot("bar", 3));
    ASSERT_EQ(proto_key_slot("{", 1), proto_crc16("{", 1) % PROTO_SLOTS);
}

static void test_map_round_trip(void) {
    proto_slotmap *m = malloc(sizeof *m), *b = malloc(sizeof *b);
    char err[256], text[PROTO_SLOTMAP_MAX];
    const char *in = "7 8192-16383=b 0-8191=a";
    ASSERT(proto_slotmap_parse(in, strlen(in), m, err, sizeof err) == 0);
    ASSERT_EQ(m->version, 7);
    ASSERT_STREQ(proto_slotmap_owner(m, 0), "a");
    ASSERT_STREQ(proto_slotmap_owner(m, 8191), "a");
    ASSERT_STREQ(proto_slotmap_owner(m, 8192), "b");
    ASSERT_EQ(proto_slotmap_count(m, "a"), 8192);
    ASSERT_EQ(proto_slotmap_count(m, "zz"), 0);
    size_t n = proto_slotmap_format(m, text, sizeof text);
    ASSERT(n > 0);
    ASSERT_MSG(strcmp(text, "7 0-8191=a 8192-16383=b") == 0, "formatted %.100s", text);
    ASSERT(proto_slotmap_parse(text, n, b, err, sizeof err) == 0);
    for (int s = 0; s < PROTO_SLOTS; s++)   /* group indexes may differ, never the owners */
        ASSERT_STREQ(proto_slotmap_owner(m, (uint16_t)s), proto_slotmap_owner(b, (uint16_t)s));
    /* a move of one range, then only the free slots */
    ASSERT_EQ(proto_slotmap_assign(m, 100, 199, "c", 0), 100);
    ASSERT_STREQ(proto_slotmap_owner(m, 150), "c");
    ASSERT_EQ(proto_slotmap_assign(m, 0, 16383, "d", 1), 0);
    int changed;
    ASSERT(proto_slotmap_assign_list(m, "10-19,30", "e", 0, &changed, err, sizeof err) == 0);
    ASSERT_EQ(changed, 11);
    ASSERT(proto_slotmap_assign_list(m, "10-", "e", 0, &changed, err, sizeof err) != 0);
    ASSERT(proto_slotmap_assign_list(m, "5-3", "e", 0, &changed, err, sizeof err) != 0);
    ASSERT(proto_slotmap_assign_list(m, "16384", "e", 0, &changed, err, sizeof err) != 0);
    proto_slotmap_init(b);
    ASSERT(proto_slotmap_assign_list(b, "all", "x", 1, &changed, err, sizeof err) == 0);
    ASSERT_EQ(changed, PROTO_SLOTS);
    ASSERT_STREQ(proto_slotmap_owner(b, 16383), "x");
    /* a slot no range names has no group */
    ASSERT(proto_slotmap_parse("1 0-9=a", 7, m, err, sizeof err) == 0);
    ASSERT(proto_slotmap_owner(m, 10) == NULL);
    free(m);
    free(b);
}

/* A move marks its slots with the group that still holds their objects;
 * the mark survives the text, and clearing it (settle) or moving back
 * ends it. */
static void test_map_move(void) {
    proto_slotmap *m = malloc(sizeof *m), *b = malloc(sizeof *b);
    char err[256], text[PROTO_SLOTMAP_MAX];
    const char *in = "3 0-8191=a 8192-16383=b";
    ASSERT(proto_slotmap_parse(in, strlen(in), m, err, sizeof err) == 0);
    ASSERT_EQ(proto_slotmap_move(m, 100, 199, "b"), 100);
    ASSERT_EQ(proto_slotmap_move(m, 150, 250, "c"), 51);   /* 150-199 are in a move already */
    ASSERT_STREQ(proto_slotmap_owner(m, 150), "b");
    ASSERT_STREQ(m->groups[m->from[150] - 1], "a");
    ASSERT_EQ(m->from[99], 0);
    size_t n = proto_slotmap_format(m, text, sizeof text);
    ASSERT_MSG(strcmp(text, "3 0-99=a 100-199=b<a 200-250=c<a 251-8191=a 8192-16383=b") == 0, "formatted %.120s", text);
    ASSERT(proto_slotmap_parse(text, n, b, err, sizeof err) == 0);
    ASSERT_STREQ(proto_slotmap_owner(b, 120), "b");
    ASSERT_STREQ(b->groups[b->from[120] - 1], "a");
    ASSERT_EQ(proto_slotmap_settle(b, 0, 16383, "b", "a"), 100);
    ASSERT_EQ(b->from[120], 0);
    ASSERT_STREQ(b->groups[b->from[220] - 1], "a");
    ASSERT_EQ(proto_slotmap_assign(b, 200, 250, "a", 0), 51);   /* moved back: no mark */
    ASSERT_EQ(b->from[220], 0);
    const char *bad[] = {"1 0-1=a<a", "1 0-1=a<", "1 0-1=<a", "1 0-1=a<b<c"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_MSG(proto_slotmap_parse(bad[i], strlen(bad[i]), m, err, sizeof err) != 0, "'%s' parsed", bad[i]);
    free(m);
    free(b);
}

static void test_map_refused(void) {
    proto_slotmap *m = malloc(sizeof *m);
    char err[256];
    const char *bad[] = {"", "x 0-1=a", "1 0-1", "1 0-16384=a", "1 5-4=a", "1 0-9=a 9-10=b",
                         "1 0-1=a/b", "1 0-1=", "1 0-1=abcdefghijabcdefghijabcdefghijab", "1 -1=a"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASSERT_MSG(proto_slotmap_parse(bad[i], strlen(bad[i]), m, err, sizeof err) != 0, "'%s' parsed", bad[i]);
    /* more groups than a map names */
    char *many = malloc(PROTO_SLOTMAP_MAX);
    size_t len = (size_t)sprintf(many, "1");
    for (int g = 0; g <= PROTO_MAX_GROUPS; g++) len += (size_t)sprintf(many + len, " %d-%d=g%d", g, g, g);
    ASSERT(proto_slotmap_parse(many, len, m, err, sizeof err) != 0);
    /* a map of more ranges than the text may hold does not format */
    proto_slotmap_init(m);
    for (int s = 0; s < 2 * (PROTO_MAX_RANGES + 1); s += 2) ASSERT(proto_slotmap_assign(m, (uint16_t)s, (uint16_t)s, "a", 0) == 1);
    ASSERT_EQ(proto_slotmap_format(m, many, PROTO_SLOTMAP_MAX), 0);
    free(many);
    free(m);
}

/* The key indexes proto_cmd_key_span gives for argv (NULL-terminated). */
static int span(const char **argv, int *first, int *step) {
    size_t lens[16];
    int argc = 0;
    for (; argv[argc]; argc++) lens[argc] = strlen(argv[argc]);
    return proto_cmd_key_span(argc, argv, lens, first, step);
}

static void test_key_span(void) {
    int first, step;
    ASSERT(span((const char *[]){"moon.putstart", "k", "10", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 1);
    ASSERT(first + step >= 3);   /* the one key */
    ASSERT(span((const char *[]){"MOON.MGETPACKED", "a", "b", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 1);
    ASSERT_EQ(step, 1);
    ASSERT(span((const char *[]){"MOON.MPUTSTART", "REPLICAS", "1", "PACKED", "a", "1", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 4);
    ASSERT_EQ(step, 2);
    ASSERT(span((const char *[]){"MOON.MPUTSTART", "REPLICAS", "1", "a", "1", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 3);
    ASSERT(span((const char *[]){"MOON.MPUTEND", "SLICES", "a", "1", "0", "", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 2);
    ASSERT_EQ(step, 4);
    ASSERT(span((const char *[]){"MOON.MPUTEND", "PACKED", "a", "1", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 2);
    ASSERT_EQ(step, 2);
    ASSERT(span((const char *[]){"MOON.MPUTEND", "a", "1", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 1);
    ASSERT(span((const char *[]){"MOON.PREFIXPIN", "7", "100", "a", NULL}, &first, &step) == 0);
    ASSERT_EQ(first, 3);
    ASSERT(span((const char *[]){"MOON.RELEASE", "a", "1", NULL}, &first, &step) != 0);
    ASSERT(span((const char *[]){"MOON.HEARTBEAT", "1", "0", NULL}, &first, &step) != 0);
    ASSERT(span((const char *[]){"GET", "a", NULL}, &first, &step) != 0);
}

static void test_moved(void) {
    char text[64], full[96], group[PROTO_GROUP_LEN];
    uint16_t slot;
    proto_moved_text(12182, "b", text, sizeof text);
    proto_error_text(PROTO_MOVED, text, full, sizeof full);
    ASSERT_STREQ(full, "MOVED 12182 b");
    ASSERT_EQ(proto_status_of_reply(full, strlen(full)), PROTO_MOVED);
    ASSERT(proto_moved_parse(full, strlen(full), &slot, group, sizeof group) == 0);
    ASSERT_EQ(slot, 12182);
    ASSERT_STREQ(group, "b");
    proto_moved_text(3, NULL, text, sizeof text);
    ASSERT_STREQ(text, "3 -");
    ASSERT(proto_moved_parse("MOVED 16384 b", 13, &slot, group, sizeof group) != 0);
    ASSERT(proto_moved_parse("MOVED 1 b/c", 11, &slot, group, sizeof group) != 0);
    ASSERT(proto_moved_parse("MOVED x b", 9, &slot, group, sizeof group) != 0);
    ASSERT(proto_moved_parse("READONLY leader", 15, &slot, group, sizeof group) != 0);
}

int main(void) {
    RUN_TEST(test_key_slot);
    RUN_TEST(test_map_round_trip);
    RUN_TEST(test_map_move);
    RUN_TEST(test_map_refused);
    RUN_TEST(test_key_span);
    RUN_TEST(test_moved);
    TEST_EXIT();
}
