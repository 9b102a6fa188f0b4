/* client/route.h - a client over several master groups (mkv_options.groups).
 *
 * The handle mkv_connect returns for groups is a router: it holds no core
 * of its own but one ordinary client per group (made at the first key of
 * that group, its cluster name "<cluster>/g/<group>", so it follows its
 * group's leader through etcd as any client does), and the slot map read
 * from etcd (etcd/slotmap.h). Each exported call on a router comes here
 * first (MKV_ROUTED): a key goes to its slot's group; a batch is split by
 * group and the parts run at once, one thread each. A -MOVED answer
 * (MKV_EMOVED) reads the map again and sends what it refused once more,
 * until timeout_ms; so does a TRYAGAIN (a slot still arriving at its new
 * group). Node ids are a group's own, so each group's client
 * keeps its own node table and engines; registered buffers are
 * registered with every group's client. */
#ifndef MKV_CLIENT_ROUTE_H
#define MKV_CLIENT_ROUTE_H

#include <hiredis/hiredis.h>

#include "client/moonkv.h"
#include "client/moonkv_async.h"

/* With a router, run call instead and return its result. */
#define MKV_ROUTED(c, call) \
    do { if ((c) && (c)->route) return (call); } while (0)

int mkv_route_connect(mkv_client **out, const mkv_options *opt);
void mkv_route_close(mkv_client *c);

int mkv_route_put(mkv_client *c, const void *key, size_t keylen, const void *buf, size_t len, int replicas);
int mkv_route_get(mkv_client *c, const void *key, size_t keylen, void *buf, size_t buflen, size_t *len_out);
int mkv_route_get_placed(mkv_client *c, const void *key, size_t keylen, mkv_place_fn *place, void *ctx,
                         uint64_t *len_out);
int mkv_route_stat(mkv_client *c, const void *key, size_t keylen, uint64_t *size, uint32_t *crc);
int mkv_route_remove(mkv_client *c, const void *key, size_t keylen);
int mkv_route_exists(mkv_client *c, const void *key, size_t keylen);
int mkv_route_get_range(mkv_client *c, const void *key, size_t keylen, uint64_t off, void *buf, size_t len,
                        size_t *got);
int mkv_route_put_batch(mkv_client *c, mkv_obj *objs, size_t n, int replicas);
int mkv_route_get_batch(mkv_client *c, mkv_obj *objs, size_t n);
int mkv_route_exists_batch(mkv_client *c, mkv_obj *objs, size_t n, int *results);
int mkv_route_remove_batch(mkv_client *c, mkv_obj *objs, size_t n);
int mkv_route_put_batchv(mkv_client *c, mkv_objv *objs, size_t n, int replicas);
int mkv_route_get_batchv(mkv_client *c, mkv_objv *objs, size_t n);
int mkv_route_get_batch_placed(mkv_client *c, mkv_pobj *objs, size_t n);
int mkv_route_exists_prefix(mkv_client *c, const mkv_obj *objs, size_t n, size_t *count);
int mkv_route_remove_all(mkv_client *c, uint64_t *removed);
redisReply *mkv_route_command_group(mkv_client *c, int *group, int argc, const char **argv, const size_t *argvlen,
                                    int *code);
int mkv_route_register(mkv_client *c, void *addr, size_t len, int warm);
int mkv_route_unregister(mkv_client *c, void *addr);
void mkv_route_stats(mkv_client *c, mkv_transfer_stats *sum);
/* What a router cannot do yet (pins, a caller's own command on the
 * async face): MKV_EINVAL. */
int mkv_route_refused(mkv_client *c, const char *what);

/* The async face over a router (moonkv_async.h): each submitted
 * operation's keys go to their groups, each group's part an operation of
 * the same kind on that group client's own face (opened at its first
 * use, done inline), the parts at once; what a group refused with MOVED
 * or TRYAGAIN reads the map again and goes once more until timeout_ms
 * (that read, and a group client's connect, run on the thread that
 * completes the last part, or on the submitting one). The router's face
 * a completes op once every part did (mkv_async_finish). */
struct mkv_async;
struct mkv_route_face;
struct mkv_route_face *mkv_route_face_new(struct mkv_async *a, int threads);
void mkv_route_face_submit(struct mkv_route_face *rf, mkv_op *op);
/* After every operation completed: the groups' faces closed. */
void mkv_route_face_free(struct mkv_route_face *rf);

#endif
