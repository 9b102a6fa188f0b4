/* core/log.h - leveled logging to stderr (or a file), one line per event. */
#ifndef MKV_LOG_H
#define MKV_LOG_H

typedef enum { LOG_DEBUG = 0, LOG_INFO = 1, LOG_NOTICE = 2, LOG_WARNING = 3, LOG_NONE = 4 } log_level;

void log_set_level(log_level l);
log_level log_get_level(void);
/* "debug", "info"/"verbose", "notice", "warning"; -1 if unknown. */
int log_level_parse(const char *s);
const char *log_level_name(log_level l);
void log_set_role(const char *role);     /* shown in every line, e.g. "master" */
char log_role_char(void);                /* its initial, as shown */

void mkv_log(log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...)   mkv_log(LOG_DEBUG, __VA_ARGS__)
#define log_info(...)    mkv_log(LOG_INFO, __VA_ARGS__)
#define log_notice(...)  mkv_log(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) mkv_log(LOG_WARNING, __VA_ARGS__)

#endif
