/* core/crash.c - see crash.h. Only async-signal-safe calls in the
 * handler (write, backtrace_symbols_fd after backtrace was primed). */
#include "core/crash.h"

#include <execinfo.h>
#include <stdint.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"

#define CRASH_FRAMES 64

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)

/* Append the decimal (or hex) text of v to buf at *at. */
static void put_num(char *buf, size_t cap, size_t *at, unsigned long v, int base) {
    char tmp[24];
    int n = 0;
    do tmp[n++] = "0123456789abcdef"[v % (unsigned)base];
    while ((v /= (unsigned)base) && n < (int)sizeof tmp);
    while (n > 0 && *at < cap) buf[(*at)++] = tmp[--n];
}

static void put_str(char *buf, size_t cap, size_t *at, const char *s) {
    while (*s && *at < cap) buf[(*at)++] = *s++;
}

/* The signals whose default action ends the process, but SIGTERM and
 * SIGINT (the server's own shutdown) and SIGKILL (uncatchable); the
 * first five are crashes, the rest came from someone. */
static const struct { int sig; const char *name; } deadly[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"}, {SIGABRT, "SIGABRT"},
    {SIGHUP, "SIGHUP"},   {SIGQUIT, "SIGQUIT"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"},
    {SIGALRM, "SIGALRM"}, {SIGXCPU, "SIGXCPU"}, {SIGXFSZ, "SIGXFSZ"}, {SIGSYS, "SIGSYS"},
    {SIGTRAP, "SIGTRAP"}, {SIGIO, "SIGIO"},     {SIGPWR, "SIGPWR"},   {SIGVTALRM, "SIGVTALRM"},
    {SIGPROF, "SIGPROF"}, {SIGSTKFLT, "SIGSTKFLT"},
};
#define NCRASH 5

static const char *sig_name(int sig, int *crash) {
    for (size_t i = 0; i < sizeof deadly / sizeof deadly[0]; i++)
        if (deadly[i].sig == sig) {
            *crash = i < NCRASH;
            return deadly[i].name;
        }
    *crash = 0;
    return "signal";
}

static void on_fatal(int sig, siginfo_t *si, void *uc) {
    (void)uc;
    char line[256];
    size_t at = 0;
    put_num(line, sizeof line, &at, (unsigned long)getpid(), 10);
    put_str(line, sizeof line, &at, ":");
    char role[2] = {log_role_char(), 0};
    put_str(line, sizeof line, &at, role);
    int crash;
    const char *name = sig_name(sig, &crash);
    put_str(line, sizeof line, &at, crash ? " # moonkv crashed: " : " # moonkv killed: ");
    put_str(line, sizeof line, &at, name);
    put_str(line, sizeof line, &at, " (signal ");
    put_num(line, sizeof line, &at, (unsigned long)sig, 10);
    if (si && si->si_code <= 0) {   /* kill(2), raise(3), abort(3): no fault, a sender */
        put_str(line, sizeof line, &at, ") sent by pid ");
        put_num(line, sizeof line, &at, (unsigned long)si->si_pid, 10);
    } else {
        put_str(line, sizeof line, &at, "), address 0x");
        put_num(line, sizeof line, &at, (unsigned long)(si ? (uintptr_t)si->si_addr : 0), 16);
    }
    put_str(line, sizeof line, &at, crash ? "; backtrace follows\n" : "\n");
    ssize_t w = write(STDERR_FILENO, line, at);
    (void)w;
    void *frames[CRASH_FRAMES];
    if (crash) backtrace_symbols_fd(frames, backtrace(frames, CRASH_FRAMES), STDERR_FILENO);
    signal(sig, SIG_DFL);   /* the default action, with the signal's own status */
    raise(sig);
}

void crash_handlers_install(void) {
    void *prime[1];
    backtrace(prime, 1);   /* loads libgcc now: the first call may allocate */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof deadly / sizeof deadly[0]; i++) sigaction(deadly[i].sig, &sa, NULL);
}

#else   /* the sanitizers' own handlers report better */
void crash_handlers_install(void) {}
#endif
