/* tests/support/harness.h - moonkv-server (or any program) as a child
 * process of an integration test: spawn it with its output in a log,
 * wait (bounded) until it answers PING, talk to it with hiredis, stop
 * it. Every child is recorded so that every exit path - normal return,
 * failed ASSERT, a signal, the global alarm - kills it: nothing outlives
 * the test binary. */
#ifndef MKV_TEST_HARNESS_H
#define MKV_TEST_HARNESS_H

#include <hiredis/hiredis.h>
#include <sys/types.h>

#include "tests/support/ports.h"   /* h_free_ports: every new test takes its ports there */

/* Built with ASan or TSan: the servers a test starts are of the same
 * build and run 2-5 times slower. A bound that stands for the product's
 * speed (not a configured timeout the test checks) is multiplied by
 * H_TIME_SCALE there; the plain build keeps the bound itself. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define H_SANITIZED  1
#define H_TIME_SCALE 2
#else
#define H_SANITIZED  0
#define H_TIME_SCALE 1
#endif

#define H_MAX_CHILDREN 32
#define H_MAX_ARGS     48
#define H_ARG_LEN      256   /* a formatted argument (h_argf): paths under $TMPDIR fit */

/* Runs after the children are gone, on exit and on fatal signals (where
 * it need not be async-signal-safe: the process is going away and what
 * it removes, such as a network namespace, would outlive it). */
extern void (*h_cleanup_hook)(void);

/* Kill children on exit and on fatal signals; bound the whole binary to
 * limit_s seconds (0: no bound). */
void h_init(unsigned limit_s);

/* $MOONKV_SERVER if it is executable, else build/rel/moonkv-server. */
const char *h_server_bin(void);

/* Fork and exec argv (argv[0] is the program, looked up in PATH;
 * NULL-terminated), stdin from /dev/null. h_spawn_ex sends stdout to
 * out and stderr to err (files created or truncated; NULL: inherited).
 * -1 on failure or when more than H_MAX_CHILDREN are alive. */
pid_t h_spawn(const char *const *argv);
pid_t h_spawn_ex(const char *const *argv, const char *out, const char *err);

/* pid (just spawned; -1 passes through) once it answers PING at
 * host:port - after AUTH password, if not NULL - within timeout_ms; a
 * child that does not come up is killed and -1 returned. */
pid_t h_ready(pid_t pid, const char *host, int port, const char *password, int timeout_ms);

/* h_ready(h_spawn_ex(argv, out, err), "127.0.0.1", port, NULL, timeout_ms) */
pid_t h_start(const char *const *argv, int port, const char *out, const char *err, int timeout_ms);

/* Until child pid exits, at most timeout_ms: 0 with its wait status in
 * *status (may be NULL); -1 on timeout, after SIGKILL and reaping it. */
int h_wait_exit(pid_t pid, int timeout_ms, int *status);

/* SIGTERM, wait up to timeout_ms, then SIGKILL: the exit code, -1 if it
 * had to be killed or died of a signal (under ASan a leak or a memory
 * error makes the exit code non-zero). */
int h_stop_status(pid_t pid, int timeout_ms);
void h_stop(pid_t pid);   /* h_stop_status with a second's grace */

void h_stop_all(void);    /* h_stop of every child */

/* The shared set-up of a test binary failed (rc < 0): one "not ok - what"
 * line, every child stopped, exit status 1. Returns when rc >= 0. */
void h_setup_or_exit(int rc, const char *what);
void h_kill(pid_t pid);   /* SIGKILL and reap */
void h_kill_all(void);
/* SIGSTOP, then until every thread of pid is stopped (state T in
 * /proc/pid/task/N/stat), bounded at 10 s: 0, or -1. kill() returns before a
 * loaded machine schedules the target's threads to stop: a multi-threaded
 * process (etcd) kept threads running for a median of 24 ms and up
 * to 200 ms after it at load 25 (docs/TESTS.md). */
int h_sigstop(pid_t pid);
/* The inode of the socket pid listens on at 127.0.0.1:port (TCP), 0 if
 * none: the same inode later means the listener was never closed. */
unsigned long h_listen_inode(pid_t pid, int port);
void h_forget(pid_t pid); /* no longer ours to kill (reaped elsewhere) */

/* hiredis connection with a connect and command timeout (5 s for the
 * first two); NULL if it cannot connect. */
redisContext *h_redis(int port);
redisContext *h_redis_host(const char *host, int port);
redisContext *h_redis_ms(const char *host, int port, int timeout_ms);
/* Room in c's reader for replies of up to bytes, kept between replies.
 * hiredis grows its read buffer 1 MiB at a time past 1 MiB, and under
 * ASan every growth is a new allocation, a copy and fresh pages: a 64 MiB
 * reply read whole cost 64 copies (2 GB) and most of a SAN test's CPU.
 * What the server sends and the client gets is the same. */
void h_redis_room(redisContext *c, size_t bytes);

/* A test that plays a member (a node, a client) on a raw connection to a
 * master proves the cluster secret first (MOON.CHALLENGE, MOON.PROVE; ""
 * when the master has none), as every member does: 0, or -1 (said on
 * stdout). h_proven(c, secret) is c once proven, else NULL (c freed). */
int h_master_prove(redisContext *c, const char *secret);
redisContext *h_proven(redisContext *c, const char *secret);

/* Runs a command (printf-style) on c and judges its reply, which may be
 * NULL, with pred against want (e.g. an is_error(reply, prefix)); the
 * reply is freed. pred's answer is returned. */
int h_command_is(redisContext *c, int (*pred)(const redisReply *, const char *), const char *want,
                 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* A numeric field of INFO section on c; -1 if it is not there. */
long long h_info_field(redisContext *c, const char *section, const char *field);

/* 1 if a line of the file at path (a child's log) holds needle. */
int h_file_has(const char *path, const char *needle);
/* h_file_has, waited for up to timeout_ms (a child writes its log when
 * it gets there): its last answer. */
int h_wait_file_has(const char *path, const char *needle, int timeout_ms);

/* A fresh directory $TMPDIR/moonkv-<name>-XXXXXX (/tmp without TMPDIR)
 * in dir: 0, or -1 with dir empty. */
int h_temp_dir(char *dir, size_t len, const char *name);
/* Removes dir and all in it, only if h_temp_dir made it for name (a
 * cleanup hook may run before it did). */
void h_temp_dir_remove(const char *dir, const char *name);

/* 1 if the server on c is process pid (INFO's process_id): a server
 * left over from another run on the same port must not pass for ours. */
int h_is_process(redisContext *c, pid_t pid);

/* Until our child pid (or, pid 0, anything) answers PING at host:port,
 * or it died; bounded. 0 once it does, -1 otherwise. */
int h_wait_ping(const char *host, int port, pid_t pid, int timeout_ms);

/* A plain TCP connection to 127.0.0.1:port (for bytes hiredis would
 * never send), with a receive buffer of rcvbuf bytes when > 0 (set before
 * connecting, so the window stays small: a slow reader the server's
 * writes come back partial to) and reads that give up after timeout_s
 * seconds when > 0; -1 if it cannot connect. */
int h_raw_connect_to(int port, int rcvbuf, int timeout_s);
int h_raw_connect(int port, int rcvbuf);   /* h_raw_connect_to(port, rcvbuf, 0) */

/* All n bytes of p sent on fd (no SIGPIPE; interrupted sends go on):
 * 0, or -1 once the peer is gone. */
int h_send_all(int fd, const void *p, size_t n);

/* Up to n bytes received from fd into p (fewer only at EOF, an error or
 * the socket's receive timeout): how many. */
size_t h_recv_all(int fd, void *p, size_t n);

/* GET /metrics of a server whose --metrics-port is port: the whole HTTP
 * response (the caller frees it), NULL if it cannot be read. */
char *h_metrics(int port);
/* How many times that server ran command name (lower case, its
 * moonkv_commands_total): 0 if never, -1 if /metrics cannot be read. */
long long h_command_calls(int port, const char *name);

/* Resident set size of process pid in kB (VmRSS), -1 if unknown. */
long h_rss_kb(pid_t pid);
/* CPU seconds pid has used (utime + stime of /proc/pid/stat), or -1. */
double h_cpu_s(pid_t pid);
/* A kB field of /proc/pid/status ("RssAnon", ...), or -1. */
long h_status_kb(pid_t pid, const char *field);

/* argv builder: at most H_MAX_ARGS, always NULL-terminated in v. One
 * more argument, or an h_argf longer than H_ARG_LEN - 1, is a broken test:
 * a "not ok" line, the children stopped, exit 1 (never a cut argument). */
typedef struct h_args {
    int n;
    const char *v[H_MAX_ARGS + 1];
    char num[H_MAX_ARGS][H_ARG_LEN];
} h_args;

void h_arg(h_args *a, const char *s);
void h_argf(h_args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void h_argv(h_args *a, const char *const *list);   /* each of a NULL-terminated list (may be NULL) */

#endif
