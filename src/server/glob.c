/* server/glob.c - glob matching (see glob.h). */
#include "server/glob.h"

#include <ctype.h>

static int fold(int ch, int nocase) { return nocase ? tolower(ch) : ch; }

/* Matches one byte against the class starting after '['. *len is set to
 * the pattern bytes the class spans, its closing ']' included. */
static int class_match(const char *p, size_t plen, int ch, int nocase, size_t *len) {
    size_t i = 0;
    int negate = 0, hit = 0;
    if (i < plen && p[i] == '^') {
        negate = 1;
        i++;
    }
    ch = fold(ch, nocase);
    for (; i < plen && p[i] != ']'; i++) {
        if (p[i] == '\\' && i + 1 < plen) {
            i++;
            hit |= fold((unsigned char)p[i], nocase) == ch;
        } else if (i + 2 < plen && p[i + 1] == '-' && p[i + 2] != ']') {
            int lo = fold((unsigned char)p[i], nocase), hi = fold((unsigned char)p[i + 2], nocase);
            if (lo > hi) {
                int t = lo;
                lo = hi;
                hi = t;
            }
            hit |= ch >= lo && ch <= hi;
            i += 2;
        } else {
            hit |= fold((unsigned char)p[i], nocase) == ch;
        }
    }
    *len = i < plen ? i + 1 : i;   /* an unclosed class runs to the end */
    return negate ? !hit : hit;
}

int glob_match(const char *pat, size_t plen, const char *str, size_t slen, int nocase) {
    size_t p = 0, s = 0;
    size_t star_p = (size_t)-1, star_s = 0;   /* where to resume after a mismatch */
    while (s < slen) {
        if (p < plen && pat[p] == '*') {
            while (p < plen && pat[p] == '*') p++;
            if (p == plen) return 1;
            star_p = p;
            star_s = s;
            continue;
        }
        int ok = 0;
        size_t step = 1;
        if (p < plen) {
            unsigned char ch = (unsigned char)str[s];
            if (pat[p] == '?') {
                ok = 1;
            } else if (pat[p] == '[') {
                ok = class_match(pat + p + 1, plen - p - 1, ch, nocase, &step);
                step += 1;
            } else if (pat[p] == '\\' && p + 1 < plen) {
                ok = fold((unsigned char)pat[p + 1], nocase) == fold(ch, nocase);
                step = 2;
            } else {
                ok = fold((unsigned char)pat[p], nocase) == fold(ch, nocase);
            }
        }
        if (ok) {
            p += step;
            s++;
        } else if (star_p != (size_t)-1) {
            p = star_p;            /* let the last '*' swallow one more byte */
            s = ++star_s;
        } else {
            return 0;
        }
    }
    while (p < plen && pat[p] == '*') p++;
    return p == plen;
}
