/* gateway/proc_client.c - see proc_client.h. */
#include "gateway/proc_client.h"

#include <pthread.h>
#include <stdio.h>

typedef struct proc_client {
    pthread_mutex_t mu;
    mkv_client *mc;
    int refs;
} proc_client;

static proc_client the = {PTHREAD_MUTEX_INITIALIZER, NULL, 0};

int proc_client_take(const mkv_options *opt, mkv_client **out, char *err, size_t errlen) {
    int rc = MKV_OK;
    pthread_mutex_lock(&the.mu);
    if (!the.mc && (rc = mkv_connect(&the.mc, opt)) != MKV_OK)
        snprintf(err, errlen, "%s", mkv_last_error(NULL));
    if (rc == MKV_OK) the.refs++;
    *out = the.mc;
    pthread_mutex_unlock(&the.mu);
    return rc;
}

void proc_client_put(mkv_client *mc) {
    if (!mc) return;
    pthread_mutex_lock(&the.mu);
    if (--the.refs == 0) {
        mkv_close(the.mc);
        the.mc = NULL;
    }
    pthread_mutex_unlock(&the.mu);
}
