/* proto/status.h - outcomes of MOON.* commands and their error words.
 *
 * The master's metadata returns a proto_status and a message without a
 * word; the reply layer sends "-WORD message" (proto_error_text); a peer
 * reads the first word back into the status (proto_status_of_reply).
 * One table in status.c holds both directions. */
#ifndef MKV_PROTO_STATUS_H
#define MKV_PROTO_STATUS_H

#include <stddef.h>

typedef enum proto_status {
    PROTO_OK = 0,
    PROTO_ERR,          /* bad argument, wrong state, a limit reached */
    PROTO_EXISTS,       /* the key is stored or being written (write-once) */
    PROTO_NOTFOUND,     /* no such key, put, node or task */
    PROTO_TIMEDOUT,     /* the put ran past its timeout and was revoked */
    PROTO_NOSPACE,      /* no room: nothing stored was touched */
    PROTO_NOREPLICAS,   /* fewer usable nodes than replicas asked for */
    PROTO_NODEDEAD,     /* the node was declared gone: register again */
    PROTO_NOAUTH,       /* registration proof or password missing or wrong */
    PROTO_WRONGPASS,    /* AUTH refused (the RESP framework's word) */
    PROTO_READONLY,     /* a standby (or fenced) master: "leader is <addr>" */
    PROTO_TRYAGAIN,     /* not now (the master is rebuilding its table): retry soon */
    PROTO_IDINUSE,      /* a node id claimed while its node is alive on its connection */
    PROTO_MOVED,        /* the key's slot belongs to another master group: "slot group" (proto/slots.h) */
    PROTO_NSTATUS
} proto_status;

/* "ERR", "EXISTS", ...; "ERR" for a value outside the enum. */
const char *proto_word(proto_status st);
/* The status whose word opens msg (whole word: "ERRATA" is none);
 * -1 if no word of the table does. */
int proto_status_of_reply(const char *msg, size_t len);
/* "WORD message" into out (truncated to outlen); its length. */
size_t proto_error_text(proto_status st, const char *msg, char *out, size_t outlen);

#endif
