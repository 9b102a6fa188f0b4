/* proto/status.c - the one table of status codes and error words. */
#include "proto/status.h"

#include <stdio.h>
#include <string.h>

static const char *const words[PROTO_NSTATUS] = {
    [PROTO_OK] = "OK",
    [PROTO_ERR] = "ERR",
    [PROTO_EXISTS] = "EXISTS",
    [PROTO_NOTFOUND] = "NOTFOUND",
    [PROTO_TIMEDOUT] = "TIMEDOUT",
    [PROTO_NOSPACE] = "NOSPACE",
    [PROTO_NOREPLICAS] = "NOREPLICAS",
    [PROTO_NODEDEAD] = "NODEDEAD",
    [PROTO_NOAUTH] = "NOAUTH",
    [PROTO_WRONGPASS] = "WRONGPASS",
    [PROTO_READONLY] = "READONLY",
    [PROTO_TRYAGAIN] = "TRYAGAIN",
    [PROTO_IDINUSE] = "IDINUSE",
    [PROTO_MOVED] = "MOVED",
};

const char *proto_word(proto_status st) {
    return (unsigned)st < PROTO_NSTATUS ? words[st] : words[PROTO_ERR];
}

int proto_status_of_reply(const char *msg, size_t len) {
    size_t n = 0;
    while (n < len && msg[n] != ' ') n++;
    for (int st = PROTO_ERR; st < PROTO_NSTATUS; st++)
        if (strlen(words[st]) == n && memcmp(msg, words[st], n) == 0) return st;
    return -1;
}

size_t proto_error_text(proto_status st, const char *msg, char *out, size_t outlen) {
    int n = snprintf(out, outlen, "%s %s", proto_word(st), msg);
    if (n < 0) return 0;
    return (size_t)n < outlen ? (size_t)n : (outlen ? outlen - 1 : 0);
}
