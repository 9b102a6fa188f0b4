/* backend/data_server.c - what every data server shares: counters. */
#include "backend/data_server.h"

void te_server_stats_add(te_server_stats *sum, const te_server_stats *s) {
    sum->bytes_in += s->bytes_in;
    sum->bytes_out += s->bytes_out;
    sum->requests += s->requests;
    sum->rejected += s->rejected;
    sum->conns_accepted += s->conns_accepted;
    sum->auth_failures += s->auth_failures;
    sum->conns_active += s->conns_active;
}
