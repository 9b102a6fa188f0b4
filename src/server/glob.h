/* server/glob.h - Redis-style glob patterns (KEYS, SCAN MATCH, CONFIG GET).
 *
 * '*' any run, '?' any byte, "[abc]" "[^a]" "[a-z]" classes, '\' escapes.
 * Binary safe. Matching backtracks only to the last '*', so time is
 * bounded by pattern length times string length whatever the pattern. */
#ifndef MKV_GLOB_H
#define MKV_GLOB_H

#include <stddef.h>

int glob_match(const char *pat, size_t plen, const char *str, size_t slen, int nocase);

#endif
