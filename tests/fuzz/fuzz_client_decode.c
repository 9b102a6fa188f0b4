/* fuzz_client_decode - libmoonkv's decoding of the master's replies
 * (src/client/placement.c): arbitrary RESP, parsed by hiredis as the
 * client would receive it, given to the PUTSTART placement decoder and
 * the GET location decoder. Either decodes into a placement whose
 * extents cover exactly the object, or is refused; never a crash or a
 * leak (ASan's leak check runs at exit). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_reply.h"
#include "backend/cap.h"
#include "client/client.h"

static mkv_client cli;   /* decoding uses only the error buffer */

static void check_cover(const mkv_placement *pl) {
    for (uint32_t i = 0; i < pl->nreplicas; i++) {
        uint64_t sum = 0;
        for (uint32_t k = 0; k < pl->replicas[i].nextents; k++) {
            uint64_t len = pl->replicas[i].extents[k].length;
            if (len == 0 || sum + len < sum) abort();
            sum += len;
        }
        if (sum != pl->size) abort();
    }
}

static void decode(const redisReply *r, uint64_t size, uint32_t rights) {
    mkv_placement pl;
    memset(&pl, 0, sizeof pl);
    if (mkv_placement_decode(&cli, r, size, rights, &pl) == MKV_OK) {
        if (pl.size != size) abort();
        check_cover(&pl);
    }
    mkv_placement_free(&pl);
    memset(&pl, 0, sizeof pl);
    if (mkv_located_decode(&cli, r, &pl) == MKV_OK) check_cover(&pl);
    mkv_placement_free(&pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2 || size > 65536) return 0;
    uint64_t objsize = 1 + (uint64_t)data[0] * 97;
    uint32_t rights = (data[1] & 1) ? TE_CAP_READ : TE_CAP_WRITE;
    redisReply *r = fuzz_reply_parse(data + 2, size - 2);
    if (r) {
        decode(r, objsize, rights);
        freeReplyObject(r);
    }
    return 0;
}
