/* core/anet.h - small socket calls: listen, connect, socket options and
 * names, in the manner of Redis's anet.
 *
 * Every call returns ANET_OK (or a new fd) on success and ANET_ERR on
 * failure, with the cause written into the caller's err[ANET_ERR_LEN]:
 * getaddrinfo's text when a name does not resolve, strerror() of the
 * failed call otherwise, so callers can prefix it with what they were
 * doing. Every fd made here is close-on-exec. */
#ifndef MKV_ANET_H
#define MKV_ANET_H

#include <stddef.h>

#define ANET_OK      0
#define ANET_ERR     -1
#define ANET_ERR_LEN 256

struct sockaddr_storage;

/* A TCP listener on host:port (port 0: any free port; see anet_sock_port),
 * with SO_REUSEADDR; each address host resolves to is tried in turn.
 * nonblock: the listener is O_NONBLOCK. The fd or ANET_ERR. */
int anet_tcp_server(char *err, const char *host, int port, int backlog, int nonblock);
/* A unix-socket listener on path, or on the abstract name "@name". A path
 * is unlinked first and created under umask 077 (only our user may connect). The fd or ANET_ERR. */
int anet_unix_server(char *err, const char *path, int backlog);
/* A TCP connection to host:port, bound first to src_host:src_port when
 * src_host is set; each address is tried in turn until timeout_ms (0: no
 * bound) runs out. The fd, non-blocking, or ANET_ERR. */
int anet_tcp_connect(char *err, const char *host, int port, const char *src_host, int src_port,
                     int timeout_ms);
/* A blocking connection to a unix socket (path or "@name"). */
int anet_unix_connect(char *err, const char *path);

int anet_nonblock(char *err, int fd, int on);
int anet_nodelay(char *err, int fd);
/* TCP_NOTSENT_LOWAT: the socket takes a write only while fewer than bytes
 * of what it holds wait unsent, and polls writable below that. */
int anet_notsent_lowat(char *err, int fd, int bytes);
/* SO_KEEPALIVE with the first probe after interval seconds. */
int anet_keepalive(char *err, int fd, int interval);
/* The local port fd is bound to, in *port. */
int anet_sock_port(char *err, int fd, int *port);
/* "ip:port" of the peer / the local end ("?:0" for other families). */
int anet_peer_name(char *err, int fd, char *buf, size_t len);
int anet_sock_name(char *err, int fd, char *buf, size_t len);
void anet_format_addr(const struct sockaddr_storage *ss, char *buf, size_t len);

#endif
