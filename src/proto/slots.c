/* proto/slots.c - see slots.h. */
#include "proto/slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "proto/verbs.h"

uint16_t proto_crc16(const void *buf, size_t len) {
    const uint8_t *p = buf;
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++) {
        crc ^= (uint16_t)(p[i] << 8);
        for (int b = 0; b < 8; b++) crc = crc & 0x8000 ? (uint16_t)((crc << 1) ^ 0x1021) : (uint16_t)(crc << 1);
    }
    return crc;
}

uint16_t proto_key_slot(const void *key, size_t len) {
    const char *k = key;
    const char *open = memchr(k, '{', len);
    if (open) {
        size_t from = (size_t)(open - k) + 1;
        const char *close = memchr(open + 1, '}', len - from);
        if (close && close > open + 1) return proto_crc16(open + 1, (size_t)(close - open - 1)) % PROTO_SLOTS;
    }
    return proto_crc16(k, len) % PROTO_SLOTS;
}

int proto_group_ok(const char *s, size_t len) {
    if (len == 0 || len >= PROTO_GROUP_LEN) return 0;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' ||
              ch == '-'))
            return 0;
    }
    return 1;
}

void proto_slotmap_init(proto_slotmap *m) { memset(m, 0, sizeof *m); }

int proto_slotmap_group(const proto_slotmap *m, const char *group) {
    for (int i = 0; i < m->ngroups; i++)
        if (strcmp(m->groups[i], group) == 0) return i + 1;
    return 0;
}

/* group's index + 1 in m, added if new; 0 if bad or one too many. */
static int group_index(proto_slotmap *m, const char *group, size_t len) {
    if (!proto_group_ok(group, len)) return 0;
    for (int i = 0; i < m->ngroups; i++)
        if (strlen(m->groups[i]) == len && memcmp(m->groups[i], group, len) == 0) return i + 1;
    if (m->ngroups == PROTO_MAX_GROUPS) return 0;
    memcpy(m->groups[m->ngroups], group, len);
    m->groups[m->ngroups][len] = '\0';
    return ++m->ngroups;
}

static int fail(char *err, size_t errlen, const char *msg, const char *at, size_t n) {
    snprintf(err, errlen, "slot map: %s at '%.*s'", msg, (int)(n > 40 ? 40 : n), at);
    return -1;
}

/* An unsigned decimal of at most 20 digits at p (end e): its value, p moved. */
static int number(const char **p, const char *e, uint64_t *v) {
    const char *s = *p;
    uint64_t x = 0;
    while (*p < e && **p >= '0' && **p <= '9' && *p - s < 20) x = x * 10 + (uint64_t)(*(*p)++ - '0');
    *v = x;
    return *p > s ? 0 : -1;
}

/* "first-last=group[<from]" at p..e into m. */
static int parse_range(proto_slotmap *m, const char *p, const char *e, char *err, size_t errlen) {
    const char *at = p;
    uint64_t first, last;
    if (number(&p, e, &first) != 0 || p == e || *p++ != '-' || number(&p, e, &last) != 0 || p == e || *p++ != '=')
        return fail(err, errlen, "want first-last=group", at, (size_t)(e - at));
    if (first > last || last >= PROTO_SLOTS) return fail(err, errlen, "slots must be 0 to 16383, first <= last", at, (size_t)(e - at));
    const char *lt = memchr(p, '<', (size_t)(e - p));
    int g = group_index(m, p, (size_t)((lt ? lt : e) - p)), f = lt ? group_index(m, lt + 1, (size_t)(e - lt - 1)) : 0;
    if (!g || (lt && (!f || f == g)))
        return fail(err, errlen, "bad group id (1-31 of [A-Za-z0-9_-]), a move from itself, or too many groups",
                    at, (size_t)(e - at));
    for (uint64_t s = first; s <= last; s++) {
        if (m->owner[s]) return fail(err, errlen, "ranges overlap", at, (size_t)(e - at));
        m->owner[s] = (uint8_t)g;
        m->from[s] = (uint8_t)f;
    }
    return 0;
}

int proto_slotmap_parse(const char *text, size_t len, proto_slotmap *m, char *err, size_t errlen) {
    proto_slotmap_init(m);
    const char *p = text, *e = text + len;
    while (p < e && *p == ' ') p++;
    if (number(&p, e, &m->version) != 0 || (p < e && *p != ' ' && *p != '\n'))
        return fail(err, errlen, "want a version first", text, len);
    int ranges = 0;
    while (p < e) {
        while (p < e && (*p == ' ' || *p == '\n')) p++;
        if (p == e) break;
        const char *w = p;
        while (p < e && *p != ' ' && *p != '\n') p++;
        if (++ranges > PROTO_MAX_RANGES) return fail(err, errlen, "too many ranges", w, (size_t)(e - w));
        if (parse_range(m, w, p, err, errlen) != 0) return -1;
    }
    return 0;
}

size_t proto_slotmap_format(const proto_slotmap *m, char *out, size_t cap) {
    int n = snprintf(out, cap, "%llu", (unsigned long long)m->version);
    if (n < 0 || (size_t)n >= cap) return 0;
    size_t len = (size_t)n;
    int ranges = 0;
    for (int s = 0; s < PROTO_SLOTS;) {
        int e = s;
        while (e + 1 < PROTO_SLOTS && m->owner[e + 1] == m->owner[s] && m->from[e + 1] == m->from[s]) e++;
        if (m->owner[s]) {
            if (++ranges > PROTO_MAX_RANGES) return 0;   /* it would not parse */
            n = snprintf(out + len, cap - len, " %d-%d=%s%s%s", s, e, m->groups[m->owner[s] - 1],
                         m->from[s] ? "<" : "", m->from[s] ? m->groups[m->from[s] - 1] : "");
            if (n < 0 || (size_t)n >= cap - len) return 0;
            len += (size_t)n;
        }
        s = e + 1;
    }
    return len;
}

const char *proto_slotmap_owner(const proto_slotmap *m, uint16_t slot) {
    uint8_t g = slot < PROTO_SLOTS ? m->owner[slot] : 0;
    return g ? m->groups[g - 1] : NULL;
}

int proto_slotmap_assign(proto_slotmap *m, uint16_t first, uint16_t last, const char *group, int only_free) {
    int g = group_index(m, group, strlen(group));
    if (!g || first > last || last >= PROTO_SLOTS) return -1;
    int changed = 0;
    for (uint32_t s = first; s <= last; s++) {
        if (m->owner[s] == g || (only_free && m->owner[s])) continue;
        m->owner[s] = (uint8_t)g;
        if (m->from[s] == g) m->from[s] = 0;   /* moved back before it settled */
        changed++;
    }
    return changed;
}

int proto_slotmap_move(proto_slotmap *m, uint16_t first, uint16_t last, const char *group) {
    int g = group_index(m, group, strlen(group));
    if (!g || first > last || last >= PROTO_SLOTS) return -1;
    int changed = 0;
    for (uint32_t s = first; s <= last; s++) {
        if (m->owner[s] == g || !m->owner[s] || m->from[s]) continue;
        m->from[s] = m->owner[s];
        m->owner[s] = (uint8_t)g;
        changed++;
    }
    return changed;
}

int proto_slotmap_settle(proto_slotmap *m, uint16_t first, uint16_t last, const char *group, const char *from) {
    int g = proto_slotmap_group(m, group), f = proto_slotmap_group(m, from), changed = 0;
    for (uint32_t s = first; g && f && s <= last && s < PROTO_SLOTS; s++)
        if (m->owner[s] == g && m->from[s] == f) m->from[s] = 0, changed++;
    return changed;
}

int proto_slotmap_count(const proto_slotmap *m, const char *group) {
    int g = proto_slotmap_group(m, group), n = 0;
    for (int s = 0; g && s < PROTO_SLOTS; s++) n += m->owner[s] == g;
    return n;
}

int proto_slotmap_assign_list(proto_slotmap *m, const char *list, const char *group, int only_free,
                              int *changed, char *err, size_t errlen) {
    *changed = 0;
    if (strcmp(list, "all") == 0) list = "0-16383";
    const char *p = list, *e = list + strlen(list);
    while (p < e) {
        const char *w = p;
        uint64_t first, last;
        if (number(&p, e, &first) != 0) return fail(err, errlen, "want a-b[,c-d...]", w, (size_t)(e - w));
        last = first;
        if (p < e && *p == '-' && (++p, number(&p, e, &last) != 0))
            return fail(err, errlen, "want a-b[,c-d...]", w, (size_t)(e - w));
        if (p < e && *p++ != ',') return fail(err, errlen, "want a-b[,c-d...]", w, (size_t)(e - w));
        int n = first <= last && last < PROTO_SLOTS ? proto_slotmap_assign(m, (uint16_t)first, (uint16_t)last, group, only_free) : -1;
        if (n < 0) return fail(err, errlen, "slots 0 to 16383, first <= last, and a valid group", w, (size_t)(e - w));
        *changed += n;
    }
    return 0;
}

/* ---- keys of a command, MOVED ---- */

/* verb is proto_verb_lookup's: the same text, not always the same pointer
 * (string literals of two files are merged only when the linker likes). */
static int is(const char *verb, const char *name) { return strcmp(verb, name) == 0; }

static int arg_is(const char *a, size_t len, const char *word) {
    return strlen(word) == len && strncasecmp(a, word, len) == 0;
}

int proto_cmd_key_span(int argc, const char *const *argv, const size_t *lens, int *first, int *step) {
    const char *v = argc > 0 ? proto_verb_lookup(argv[0], lens[0]) : NULL;
    *step = 1;
    if (!v) return -1;
    if (is(v, PROTO_VERB_PUTSTART) || is(v, PROTO_VERB_PUTEND) || is(v, PROTO_VERB_PUTREVOKE) ||
        is(v, PROTO_VERB_GET) || is(v, PROTO_VERB_REMOVE) || is(v, PROTO_VERB_EXISTS) || is(v, PROTO_VERB_OBJECT)) {
        *first = 1;
        *step = argc;   /* the one key */
    } else if (is(v, PROTO_VERB_MGET) || is(v, PROTO_VERB_MGETPACKED) || is(v, PROTO_VERB_MEXISTS) ||
               is(v, PROTO_VERB_PREFIX)) {
        *first = 1;
    } else if (is(v, PROTO_VERB_PREFIXPIN) || is(v, PROTO_VERB_REPIN)) {
        *first = 3;
    } else if (is(v, PROTO_VERB_MPUTSTART)) {   /* REPLICAS n [PACKED] key size ... */
        *first = argc > 3 && arg_is(argv[3], lens[3], "PACKED") ? 4 : 3;
        *step = 2;
    } else if (is(v, PROTO_VERB_MPUTEND)) {     /* [PACKED | SLICES] key crc [slice_size crcs] ... */
        int sliced = argc > 1 && arg_is(argv[1], lens[1], "SLICES");
        *first = argc > 1 && (sliced || arg_is(argv[1], lens[1], "PACKED")) ? 2 : 1;
        *step = sliced ? 4 : 2;
    } else {
        return -1;
    }
    return 0;
}

size_t proto_moved_text(uint16_t slot, const char *group, char *out, size_t cap) {
    int n = snprintf(out, cap, "%u %s", (unsigned)slot, group && *group ? group : "-");
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : (cap ? cap - 1 : 0);
}

int proto_moved_parse(const char *msg, size_t len, uint16_t *slot, char *group, size_t groupcap) {
    const char *p = msg, *e = msg + len;
    if (len < 6 || memcmp(p, "MOVED ", 6) != 0) return -1;
    p += 6;
    uint64_t s;
    if (number(&p, e, &s) != 0 || s >= PROTO_SLOTS || p == e || *p++ != ' ') return -1;
    const char *g = p;
    while (p < e && *p != ' ') p++;
    size_t glen = (size_t)(p - g);
    if (glen + 1 > groupcap || !(proto_group_ok(g, glen) || (glen == 1 && *g == '-'))) return -1;
    memcpy(group, g, glen);
    group[glen] = '\0';
    *slot = (uint16_t)s;
    return 0;
}
