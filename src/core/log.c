/* core/log.c - see log.h. Lines look like Redis's:
 *   12345:M 02 Dec 2026 16:55:10.123 * message */
#include "core/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static log_level current_level = LOG_NOTICE;
static char role_char = 'S';
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

void log_set_level(log_level l) { current_level = l; }
log_level log_get_level(void) { return current_level; }

static const char *names[] = {"debug", "verbose", "notice", "warning", "nothing"};

int log_level_parse(const char *s) {
    if (!strcasecmp(s, "info")) return LOG_INFO;
    for (int i = 0; i <= LOG_NONE; i++)
        if (!strcasecmp(s, names[i])) return i;
    return -1;
}

const char *log_level_name(log_level l) {
    return (l >= LOG_DEBUG && l <= LOG_NONE) ? names[l] : "unknown";
}

void log_set_role(const char *role) {
    if (!role || !*role) return;
    /* Redis marks M for master, S for replica; we use the role's initial. */
    role_char = (char)(role[0] >= 'a' && role[0] <= 'z' ? role[0] - 32 : role[0]);
}

char log_role_char(void) { return role_char; }

void mkv_log(log_level l, const char *fmt, ...) {
    if (l < current_level || l >= LOG_NONE) return;
    static const char marks[] = ".-*#";
    char msg[1024], ts[64];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    localtime_r(&tv.tv_sec, &tm);
    size_t off = strftime(ts, sizeof ts, "%d %b %Y %H:%M:%S.", &tm);
    snprintf(ts + off, sizeof ts - off, "%03d", (int)(tv.tv_usec / 1000));

    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%d:%c %s %c %s\n", (int)getpid(), role_char, ts, marks[l], msg);
    fflush(stderr);
    pthread_mutex_unlock(&log_lock);
}
