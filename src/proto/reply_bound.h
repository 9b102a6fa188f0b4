/* proto/reply_bound.h - a ceiling on what a master's reply can make
 * hiredis allocate before its bytes arrive.
 *
 * hiredis 0.14 (Debian 12) allocates an array's element table from the
 * declared count ("*344444444\r\n" is 2.7 GB) and has no maxelements
 * setting, so every reader that parses a master's replies is bounded here
 * instead: an array declaring more than PROTO_MAX_REPLY_ELEMENTS fails the
 * reader (hiredis reports it as "Out of memory") and the link is dropped. */
#ifndef MKV_PROTO_REPLY_BOUND_H
#define MKV_PROTO_REPLY_BOUND_H

#include <hiredis/read.h>

/* The largest array a master sends is a batch reply or a topology: far
 * below this, which keeps one element table at 8 MiB at most. */
#define PROTO_MAX_REPLY_ELEMENTS (1 << 20)

/* Installs the bound on r (a context's rc->reader, or a bare reader). */
void proto_reader_bound(redisReader *r);

#endif
