/* backend/netio.h - deadline-bounded socket I/O shared by the transports,
 * the data-plane server and peer authentication.
 *
 * Every helper works on blocking and non-blocking fds alike: it tries the
 * syscall first and only waits with poll() on EAGAIN, so a hot stream
 * costs one syscall per chunk. Deadlines are mono_ms() values; 0 means
 * "wait forever" (an idle server connection waiting for its next
 * request). */
#ifndef MKV_NETIO_H
#define MKV_NETIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* 0 on success; -1 with errno set: ETIMEDOUT past the deadline, EPIPE
 * when the peer closed the stream (short read), or the syscall's error. */
int te_read_full(int fd, void *buf, size_t n, uint64_t deadline_ms);
int te_write_full(int fd, const void *buf, size_t n, uint64_t deadline_ms);
/* Writes every byte of iov[0..iovcnt); iov is consumed (modified). */
int te_writev_full(int fd, struct iovec *iov, int iovcnt, uint64_t deadline_ms);
/* Waits until fd is readable (events=POLLIN) or writable (POLLOUT). */
int te_wait_fd(int fd, short events, uint64_t deadline_ms);

/* Advance an iovec array past n written/read bytes; returns the index of
 * the first iovec with bytes left (== iovcnt when all done). */
int te_iov_advance(struct iovec *iov, int iovcnt, size_t n);

int te_set_nonblock(int fd, int on);
/* now + ms; ms <= 0 gives a deadline that has already passed. */
uint64_t te_deadline(int ms);

/* parse_hostport that also accepts port 0 ("bind any free port"). */
int te_split_hostport(const char *s, char *host, size_t hostlen, int *port);
/* A TCP listener on "host:port" (port 0: any free one, then in *port),
 * backlog 128; nonblock as anet_tcp_server. The fd, or -1 with the
 * reason (a bad address or the socket's error) in why. */
int te_listen_tcp(const char *addr, int nonblock, int *port, char *why, size_t whylen);
/* Split "unix:/path" / "unix:@abstract" into a sockaddr_un; 0 or -1. */
struct sockaddr_un;
int te_unix_addr(const char *addr, struct sockaddr_un *sa, unsigned *salen);

#endif
