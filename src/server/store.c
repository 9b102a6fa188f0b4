/* server/store.c - what every store shares. */
#include "server/store.h"

#include <string.h>

const char *store_strerror(int code) {
    switch (code) {
    case STORE_OK:       return "ok";
    case STORE_EXISTS:   return "key already exists";
    case STORE_NOSPACE:  return "not enough memory";
    case STORE_NOTFOUND: return "no such key";
    case STORE_TOOBIG:   return "value larger than the store can hold";
    case STORE_ERR:      return "store failure";
    case STORE_REFUSED:  return "refused";
    default:             return "unknown store error";
    }
}

void store_get_inline(store *s, const store_key *keys, size_t n, int flags, store_got *got,
                      store_got_fn *done, void *ctx) {
    (void)flags;   /* every value is held here: none streams */
    for (size_t i = 0; i < n; i++) {
        store_got *g = &got[i];
        g->sl.count = 0;
        g->stream = NULL;
        g->rc = s->ops->get_sliced ? s->ops->get_sliced(s, keys[i].ptr, keys[i].len, &g->data, &g->len, &g->pin, &g->sl)
                                   : s->ops->get(s, keys[i].ptr, keys[i].len, &g->data, &g->len, &g->pin);
        if (g->rc != STORE_OK && g->rc != STORE_NOTFOUND) memcpy(g->errstr, s->errstr, sizeof g->errstr);
    }
    done(ctx);
}
