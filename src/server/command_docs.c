/* server/command_docs.c - COMMAND, COMMAND COUNT/INFO/DOCS/LIST.
 *
 * Everything is generated from the command rows, so a new command is
 * described the moment it is registered. COMMAND DOCS turns the row's
 * synopsis ("key value [NX]", "cursor [MATCH pattern] [COUNT count]")
 * into Redis 7's argument maps, which redis-cli reads at start-up. */
#include "server/commands.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/util.h"

/* ---- COMMAND INFO ---- */

typedef struct flag_name {
    uint32_t flag;
    const char *name;
} flag_name;

static const flag_name cmd_flag_names[] = {
    {CMD_WRITE, "write"}, {CMD_READONLY, "readonly"}, {CMD_FAST, "fast"},
    {CMD_NOAUTH, "no-auth"}, {CMD_ADMIN, "admin"}, {CMD_STALE, "stale"},
    {CMD_MEMBER, "member"},
};
#define NFLAGS (sizeof cmd_flag_names / sizeof cmd_flag_names[0])

static void reply_flags(client *c, const command *cmd) {
    long long n = 0;
    for (size_t i = 0; i < NFLAGS; i++) n += (cmd->flags & cmd_flag_names[i].flag) != 0;
    reply_set(c, n);
    for (size_t i = 0; i < NFLAGS; i++)
        if (cmd->flags & cmd_flag_names[i].flag) reply_simple(c, cmd_flag_names[i].name);
}

static void reply_acl_categories(client *c, const command *cmd) {
    const char *cats[4];
    char group[40];
    int n = 0;
    snprintf(group, sizeof group, "@%s", cmd->group ? cmd->group : "moonkv");
    cats[n++] = group;
    if (cmd->flags & CMD_WRITE) cats[n++] = "@write";
    if (cmd->flags & CMD_READONLY) cats[n++] = "@read";
    cats[n++] = (cmd->flags & CMD_FAST) ? "@fast" : "@slow";
    reply_set(c, n);
    for (int i = 0; i < n; i++) reply_simple(c, cats[i]);
}

static void reply_key_specs(client *c, const command *cmd) {
    if (cmd->first_key <= 0) {
        reply_array(c, 0);
        return;
    }
    reply_array(c, 1);
    reply_map(c, 3);
    reply_bulk_cstr(c, "flags");
    reply_set(c, 2);
    reply_simple(c, (cmd->flags & CMD_WRITE) ? "RW" : "RO");
    reply_simple(c, (cmd->flags & CMD_WRITE) ? "UPDATE" : "ACCESS");
    reply_bulk_cstr(c, "begin_search");
    reply_map(c, 2);
    reply_bulk_cstr(c, "type");
    reply_bulk_cstr(c, "index");
    reply_bulk_cstr(c, "spec");
    reply_map(c, 1);
    reply_bulk_cstr(c, "index");
    reply_integer(c, cmd->first_key);
    reply_bulk_cstr(c, "find_keys");
    reply_map(c, 2);
    reply_bulk_cstr(c, "type");
    reply_bulk_cstr(c, "range");
    reply_bulk_cstr(c, "spec");
    reply_map(c, 3);
    reply_bulk_cstr(c, "lastkey");   /* relative to the first key, -1 = to the end */
    reply_integer(c, cmd->last_key < 0 ? cmd->last_key : cmd->last_key - cmd->first_key);
    reply_bulk_cstr(c, "keystep");
    reply_integer(c, cmd->key_step);
    reply_bulk_cstr(c, "limit");
    reply_integer(c, 0);
}

static void reply_command_info(client *c, const command *cmd) {
    reply_array(c, 10);
    reply_bulk_cstr(c, cmd->name);
    reply_integer(c, cmd->arity);
    reply_flags(c, cmd);
    reply_integer(c, cmd->first_key);
    reply_integer(c, cmd->last_key);
    reply_integer(c, cmd->key_step);
    reply_acl_categories(c, cmd);
    reply_set(c, 0);          /* tips */
    reply_key_specs(c, cmd);
    reply_array(c, 0);        /* subcommands */
}

/* ---- COMMAND DOCS: the synopsis parser ---- */

#define DOC_MAX_ARGS 64
#define DOC_NAME_MAX 32

typedef struct doc_arg {
    char name[DOC_NAME_MAX];
    char token[DOC_NAME_MAX];   /* "" if none */
    const char *type;           /* "key", "string", "integer", "pattern", "pure-token", "oneof", "block" */
    int optional, multiple;
    int child, nchildren;       /* index into the pool, for oneof/block */
} doc_arg;

typedef struct doc_parse {
    const char *p;              /* cursor in the synopsis */
    doc_arg pool[DOC_MAX_ARGS];
    int n;
    int overflow;
} doc_parse;

static int is_token_word(const char *w) {
    int upper = 0;
    for (; *w; w++) {
        if (islower((unsigned char)*w)) return 0;
        upper |= isupper((unsigned char)*w) != 0;
    }
    return upper;
}

static void lower_copy(char *dst, const char *src) {
    size_t i = 0;
    for (; src[i] && i < DOC_NAME_MAX - 1; i++) dst[i] = (char)tolower((unsigned char)src[i]);
    dst[i] = '\0';
}

static const char *type_for_name(const char *name) {
    static const char *ints[] = {"count", "cursor", "index", "protover", "numkeys", "id"};
    if (strcmp(name, "key") == 0) return "key";
    if (strcmp(name, "pattern") == 0) return "pattern";
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (strcmp(name, ints[i]) == 0) return "integer";
    return "string";
}

/* Next lexeme: "[", "]", "|", "..." or a word; "" at the end. */
static void next_lexeme(doc_parse *dp, char *out) {
    while (*dp->p == ' ') dp->p++;
    size_t n = 0;
    if (*dp->p == '[' || *dp->p == ']' || *dp->p == '|') {
        out[n++] = *dp->p++;
    } else if (strncmp(dp->p, "...", 3) == 0) {
        memcpy(out, "...", 3);
        n = 3;
        dp->p += 3;
    } else {
        while (*dp->p && !strchr(" []|", *dp->p) && strncmp(dp->p, "...", 3) != 0) {
            if (n < DOC_NAME_MAX - 1) out[n++] = *dp->p;
            dp->p++;
        }
    }
    out[n] = '\0';
}

static void peek_lexeme(doc_parse *dp, char *out) {
    const char *save = dp->p;
    next_lexeme(dp, out);
    dp->p = save;
}

static doc_arg *new_arg(doc_parse *dp) {
    if (dp->n == DOC_MAX_ARGS) {
        dp->overflow = 1;
        return NULL;
    }
    doc_arg *a = &dp->pool[dp->n++];
    memset(a, 0, sizeof *a);
    return a;
}

static int parse_seq(doc_parse *dp, int *first);

/* A word: "key", "NX", or "MATCH pattern" (a token with its value).
 * "AUTH username password" becomes a block. */
static int parse_word(doc_parse *dp, const char *word, int *index) {
    doc_arg *a = new_arg(dp);
    if (!a) return -1;
    *index = (int)(a - dp->pool);
    char la[DOC_NAME_MAX];
    if (!is_token_word(word)) {
        lower_copy(a->name, word);
        a->type = type_for_name(a->name);
        return 0;
    }
    snprintf(a->token, sizeof a->token, "%s", word);
    lower_copy(a->name, word);
    a->type = "pure-token";
    int values = 0;
    for (;;) {   /* lower-case words after a token are its values */
        peek_lexeme(dp, la);
        if (la[0] == '\0' || strchr("[]|", la[0]) || strcmp(la, "...") == 0 || is_token_word(la))
            break;
        next_lexeme(dp, la);
        doc_arg *v = new_arg(dp);
        if (!v) return -1;
        lower_copy(v->name, la);
        v->type = type_for_name(v->name);
        if (values++ == 0) a->child = (int)(v - dp->pool);
        a->nchildren++;
    }
    if (values == 1) {           /* "MATCH pattern": one arg carrying the token */
        doc_arg *v = &dp->pool[a->child];
        memcpy(a->name, v->name, sizeof a->name);
        a->type = v->type;
        a->nchildren = 0;
    } else if (values > 1) {
        a->type = "block";
    }
    return 0;
}

/* "[ ... | ... ]" after its "[": one item made optional, several made a
 * block, alternatives a oneof. "[key ...]" right after "key" marks it
 * multiple instead (Redis's "key [key ...]"). */
static int parse_group(doc_parse *dp, int *index, int prev) {
    int alts[DOC_MAX_ARGS], nalts = 0;
    char la[DOC_NAME_MAX];
    const char *start = dp->p;
    next_lexeme(dp, la);
    char after[DOC_NAME_MAX];
    peek_lexeme(dp, after);
    if (prev >= 0 && strcmp(after, "...") == 0 && strcasecmp(la, dp->pool[prev].name) == 0) {
        next_lexeme(dp, la);   /* "..." */
        next_lexeme(dp, la);   /* "]" */
        dp->pool[prev].multiple = 1;
        *index = -1;
        return 0;
    }
    dp->p = start;
    for (;;) {
        int first, count = parse_seq(dp, &first);
        if (count < 0) return -1;
        if (count > 1) {
            doc_arg *b = new_arg(dp);
            if (!b) return -1;
            memcpy(b->name, dp->pool[first].name, sizeof b->name);
            b->type = "block";
            b->child = first;
            b->nchildren = count;
            first = (int)(b - dp->pool);
        }
        if (count > 0 && nalts < DOC_MAX_ARGS) alts[nalts++] = first;
        next_lexeme(dp, la);
        if (strcmp(la, "|") != 0) break;   /* "]" or the end */
    }
    if (nalts == 0) {
        *index = -1;
        return 0;
    }
    int item = alts[0];
    if (nalts > 1) {
        /* A oneof's children must be contiguous in the pool: copy them. */
        doc_arg *o = new_arg(dp);
        if (!o) return -1;
        item = (int)(o - dp->pool);
        o->type = "oneof";
        o->child = dp->n;
        o->nchildren = nalts;
        for (int i = 0; i < nalts; i++) {
            doc_arg *ch = new_arg(dp);
            if (!ch) return -1;
            *ch = dp->pool[alts[i]];
        }
        memcpy(o->name, dp->pool[o->child].name, sizeof o->name);
    }
    dp->pool[item].optional = 1;
    *index = item;
    return 0;
}

/* Parses items until "]", "|" or the end. Top-level items of one sequence
 * are made contiguous by copying them after parsing. Returns the count. */
static int parse_seq(doc_parse *dp, int *first) {
    int items[DOC_MAX_ARGS], n = 0, prev = -1;
    char lex[DOC_NAME_MAX];
    for (;;) {
        peek_lexeme(dp, lex);
        if (lex[0] == '\0' || strcmp(lex, "]") == 0 || strcmp(lex, "|") == 0) break;
        next_lexeme(dp, lex);
        int idx = -1;
        if (strcmp(lex, "...") == 0) {
            if (prev >= 0) dp->pool[prev].multiple = 1;
            continue;
        }
        int rc = strcmp(lex, "[") == 0 ? parse_group(dp, &idx, prev) : parse_word(dp, lex, &idx);
        if (rc < 0) return -1;
        if (idx >= 0 && n < DOC_MAX_ARGS) items[n++] = prev = idx;
    }
    int base = dp->n;
    for (int i = 0; i < n; i++) {
        doc_arg *a = new_arg(dp);
        if (!a) return -1;
        *a = dp->pool[items[i]];
    }
    *first = base;
    return n;
}

static void reply_doc_args(client *c, doc_parse *dp, int first, int n) {
    reply_array(c, n);
    for (int i = first; i < first + n; i++) {
        doc_arg *a = &dp->pool[i];
        int nflags = a->optional + a->multiple;
        long long fields = 2 + (a->token[0] != '\0') + (nflags > 0) + (a->nchildren > 0);
        reply_map(c, fields);
        reply_bulk_cstr(c, "name");
        reply_bulk_cstr(c, a->name);
        reply_bulk_cstr(c, "type");
        reply_bulk_cstr(c, a->type);
        if (a->token[0]) {
            reply_bulk_cstr(c, "token");
            reply_bulk_cstr(c, a->token);
        }
        if (nflags > 0) {
            reply_bulk_cstr(c, "flags");
            reply_array(c, nflags);
            if (a->optional) reply_simple(c, "optional");
            if (a->multiple) reply_simple(c, "multiple");
        }
        if (a->nchildren > 0) {
            reply_bulk_cstr(c, "arguments");
            reply_doc_args(c, dp, a->child, a->nchildren);
        }
    }
}

static void reply_command_docs(client *c, const command *cmd) {
    doc_parse dp = {.p = cmd->syntax ? cmd->syntax : ""};
    int first = 0, n = parse_seq(&dp, &first);
    if (n < 0 || dp.overflow) n = 0;   /* a synopsis too rich to describe */
    reply_bulk_cstr(c, cmd->name);
    reply_map(c, 5);
    reply_bulk_cstr(c, "summary");
    reply_bulk_cstr(c, cmd->summary ? cmd->summary : "");
    reply_bulk_cstr(c, "since");
    reply_bulk_cstr(c, cmd->since ? cmd->since : "0.1.0");
    reply_bulk_cstr(c, "group");
    reply_bulk_cstr(c, cmd->group ? cmd->group : "moonkv");
    reply_bulk_cstr(c, "complexity");
    reply_bulk_cstr(c, (cmd->flags & CMD_FAST) ? "O(1)" : "O(N)");
    reply_bulk_cstr(c, "arguments");
    reply_doc_args(c, &dp, first, n);
}

/* ---- the COMMAND command ---- */

static const command *arg_command(client *c, int i) {
    return commands_lookup(c->srv, c->argv[i].ptr, c->argv[i].len);
}

static void command_docs(client *c) {
    server *srv = c->srv;
    if (c->argc == 2) {
        size_t n = commands_count(srv);
        reply_map(c, (long long)n);
        for (size_t i = 0; i < n; i++) reply_command_docs(c, commands_at(srv, i));
        return;
    }
    long long found = 0;   /* unknown names are left out, as in Redis */
    for (int i = 2; i < c->argc; i++) found += arg_command(c, i) != NULL;
    reply_map(c, found);
    for (int i = 2; i < c->argc; i++) {
        const command *cmd = arg_command(c, i);
        if (cmd) reply_command_docs(c, cmd);
    }
}

static void command_info(client *c) {
    server *srv = c->srv;
    if (c->argc <= 2) {
        size_t n = commands_count(srv);
        reply_array(c, (long long)n);
        for (size_t i = 0; i < n; i++) reply_command_info(c, commands_at(srv, i));
        return;
    }
    reply_array(c, c->argc - 2);
    for (int i = 2; i < c->argc; i++) {
        const command *cmd = arg_command(c, i);
        if (cmd) reply_command_info(c, cmd);
        else reply_null(c);
    }
}

static void command_list(client *c) {
    size_t n = commands_count(c->srv);
    reply_array(c, (long long)n);
    for (size_t i = 0; i < n; i++) reply_bulk_cstr(c, commands_at(c->srv, i)->name);
}

void command_command(client *c) {
    if (c->argc == 1) {
        command_info(c);
        return;
    }
    const resp_arg *sub = &c->argv[1];
    if (strieq_len(sub->ptr, sub->len, "count") && c->argc == 2)
        reply_integer(c, (long long)commands_count(c->srv));
    else if (strieq_len(sub->ptr, sub->len, "info"))
        command_info(c);
    else if (strieq_len(sub->ptr, sub->len, "docs"))
        command_docs(c);
    else if (strieq_len(sub->ptr, sub->len, "list") && c->argc == 2)
        command_list(c);
    else
        reply_errorf(c, "ERR unknown subcommand or wrong number of arguments for '%.128s'. Try COMMAND HELP.",
                     sub->ptr);
}
