/* backend/auth.c - mutual challenge-response over a stream socket.
 *
 *   client -> server  "MKVA" ver=1 Nc[16]
 *   server -> client  "MKVA" ver=1 Ns[16] MAC(K, "srv" Nc Ns)
 *   client -> server  MAC(K, "cli" Ns Nc)
 *   server -> client  1 byte verdict (1 = accepted)
 *
 * K is derived from the secret, so neither the secret nor K crosses the
 * wire. The direction labels make each side's answer useless as the
 * other's: a peer reflecting our own challenge back cannot get a valid
 * answer out of us for it. The server answers first, so a client learns a
 * wrong secret before it sends anything derived from its own key. */
#include "backend/auth.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend/netio.h"
#include "core/siphash.h"

#define AUTH_MAGIC   "MKVA"
#define AUTH_VERSION 1
#define NONCE_LEN    16
#define MAC_LEN      16
#define HELLO_LEN    (4 + 1 + NONCE_LEN)

static void auth_key(const char *secret, uint8_t key[SIPHASH_KEY_LEN]) {
    /* A fixed public key turns the PRF into a key-derivation hash. */
    static const uint8_t kdf_key[SIPHASH_KEY_LEN] = "moonkv-auth-kdf";
    uint8_t in[16 + 256];
    size_t n = strnlen(secret, 256);
    memcpy(in, "moonkv auth v1\0\0", 16);
    memcpy(in + 16, secret, n);
    siphash24_128(in, 16 + n, kdf_key, key);
}

static void auth_answer(const uint8_t key[SIPHASH_KEY_LEN], const char *label,
                        const uint8_t *first, const uint8_t *second, uint8_t out[MAC_LEN]) {
    uint8_t in[3 + 2 * NONCE_LEN];
    memcpy(in, label, 3);
    memcpy(in + 3, first, NONCE_LEN);
    memcpy(in + 3 + NONCE_LEN, second, NONCE_LEN);
    siphash24_128(in, sizeof in, key, out);
}

static int mac_equal(const uint8_t *a, const uint8_t *b) {
    uint8_t d = 0;
    for (int i = 0; i < MAC_LEN; i++) d |= (uint8_t)(a[i] ^ b[i]);
    return d == 0;
}

static int io_fail(const char *what, char *err, size_t errlen) {
    if (errno == ETIMEDOUT) snprintf(err, errlen, "auth: timed out %s", what);
    else if (errno == EPIPE) snprintf(err, errlen, "auth: peer closed %s", what);
    else snprintf(err, errlen, "auth: %s: %s", what, strerror(errno));
    return TE_AUTH_ERR;
}

static void hello_make(uint8_t hello[HELLO_LEN], const uint8_t nonce[NONCE_LEN]) {
    memcpy(hello, AUTH_MAGIC, 4);
    hello[4] = AUTH_VERSION;
    memcpy(hello + 5, nonce, NONCE_LEN);
}

static int hello_ok(const uint8_t hello[HELLO_LEN]) {
    return memcmp(hello, AUTH_MAGIC, 4) == 0 && hello[4] == AUTH_VERSION;
}

int te_auth_client(int fd, const char *secret, int timeout_ms, char *err, size_t errlen) {
    uint64_t dl = te_deadline(timeout_ms);
    uint8_t key[SIPHASH_KEY_LEN], nc[NONCE_LEN], hello[HELLO_LEN];
    uint8_t reply[HELLO_LEN + MAC_LEN], want[MAC_LEN], answer[MAC_LEN], verdict;

    if (random_bytes(nc, sizeof nc) != 0) {
        snprintf(err, errlen, "auth: no randomness");
        return TE_AUTH_ERR;
    }
    auth_key(secret, key);
    hello_make(hello, nc);
    if (te_write_full(fd, hello, sizeof hello, dl) < 0) return io_fail("sending hello", err, errlen);
    if (te_read_full(fd, reply, sizeof reply, dl) < 0) return io_fail("waiting for challenge", err, errlen);
    if (!hello_ok(reply)) {
        snprintf(err, errlen, "auth: peer does not speak the moonkv data plane");
        return TE_AUTH_REFUSED;
    }
    const uint8_t *ns = reply + 5;
    auth_answer(key, "srv", nc, ns, want);
    if (!mac_equal(want, reply + HELLO_LEN)) {
        snprintf(err, errlen, "auth: bad secret (server's answer does not match ours)");
        return TE_AUTH_REFUSED;
    }
    auth_answer(key, "cli", ns, nc, answer);
    if (te_write_full(fd, answer, sizeof answer, dl) < 0) return io_fail("sending answer", err, errlen);
    if (te_read_full(fd, &verdict, 1, dl) < 0) return io_fail("waiting for verdict", err, errlen);
    if (verdict != 1) {
        snprintf(err, errlen, "auth: bad secret (refused by server)");
        return TE_AUTH_REFUSED;
    }
    return TE_AUTH_OK;
}

int te_auth_server(int fd, const char *secret, int timeout_ms, char *err, size_t errlen) {
    uint64_t dl = te_deadline(timeout_ms);
    uint8_t key[SIPHASH_KEY_LEN], ns[NONCE_LEN], hello[HELLO_LEN];
    uint8_t reply[HELLO_LEN + MAC_LEN], want[MAC_LEN], answer[MAC_LEN];

    if (random_bytes(ns, sizeof ns) != 0) {
        snprintf(err, errlen, "auth: no randomness");
        return TE_AUTH_ERR;
    }
    if (te_read_full(fd, hello, sizeof hello, dl) < 0) return io_fail("waiting for hello", err, errlen);
    if (!hello_ok(hello)) {
        snprintf(err, errlen, "auth: peer does not speak the moonkv data plane");
        return TE_AUTH_ERR;
    }
    const uint8_t *nc = hello + 5;
    if (memcmp(nc, ns, NONCE_LEN) == 0) {   /* our own challenge reflected */
        snprintf(err, errlen, "auth: reflected challenge");
        return TE_AUTH_ERR;
    }
    auth_key(secret, key);
    hello_make(reply, ns);
    auth_answer(key, "srv", nc, ns, reply + HELLO_LEN);
    if (te_write_full(fd, reply, sizeof reply, dl) < 0) return io_fail("sending challenge", err, errlen);
    if (te_read_full(fd, answer, sizeof answer, dl) < 0) return io_fail("waiting for answer", err, errlen);
    auth_answer(key, "cli", ns, nc, want);
    uint8_t verdict = mac_equal(want, answer) ? 1 : 0;
    /* Tell a refused client why it is dropped; errors here do not matter. */
    if (te_write_full(fd, &verdict, 1, dl) < 0 && verdict) return io_fail("sending verdict", err, errlen);
    if (!verdict) {
        snprintf(err, errlen, "auth: bad secret (client's answer does not match)");
        return TE_AUTH_ERR;
    }
    return TE_AUTH_OK;
}
