/* server/store.c - what every store shares. */
#include "server/store.h"

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
