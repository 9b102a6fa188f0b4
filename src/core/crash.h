/* core/crash.h - a process that dies of a signal says so.
 *
 * SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT write one log line (pid,
 * role, the signal, the faulting address or the sender) and a backtrace
 * to stderr before the default action runs again (a core dump, the exit
 * status); every other signal whose default ends the process (SIGHUP,
 * SIGUSR1, SIGALRM, ...; not SIGTERM and SIGINT, which shut the server
 * down and say so, nor SIGKILL) writes the line naming its sender.
 * Without this, such an exit left no line at all: a master that vanished
 * could not be told from one killed -9. Not installed under ASan or
 * TSan, whose own reports are better. */
#ifndef MKV_CRASH_H
#define MKV_CRASH_H

void crash_handlers_install(void);

#endif
