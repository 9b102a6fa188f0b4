/* backend/shm_maps.h - one mapping per node segment per process, warmed
 * in the background.
 *
 * A map-mode shm path used to map a node's segment and touch every page
 * before its first transfer (shm_warm.h: about a second per GB here), and
 * every transport in the process did it again for its own mapping (a
 * gateway with --io-threads N has N). Here every path of the process to
 * the same segment (same memfd: device and inode) shares one mapping, and
 * one thread per process warms the cold ones, a chunk at a time, at low
 * priority, while transfers to cold chunks take the fd path: the chunks
 * transfers found cold as they come, and the rest in order (at most at a
 * given rate) only while the process's transfers (to any mapping) pause,
 * so that under
 * load the warmer's page traps do not take the cores from the requests. The thread runs while any mapping is held and stops
 * (joined) when the last one is released; a mapping is unmapped only
 * when no path holds it and the thread is not inside it.
 *
 * The same thread watches the node processes that handed the segments
 * out (shm_map_watch): once one exits, its mapping's pages are replaced
 * by anonymous ones at the same address (so a copy in flight on another
 * thread reads zeros, which fail its checksum, rather than faulting),
 * its fd by /dev/null under the same number, and the mapping serves no
 * more transfers. An idle client thus holds neither a mapping nor an fd
 * of a dead node's segment (a memfd's memory is freed once the node's
 * other clients let go too), before its paths notice on their next
 * request. */
#ifndef MKV_SHM_MAPS_H
#define MKV_SHM_MAPS_H

#include <stddef.h>
#include <stdint.h>

typedef struct shm_map shm_map;

/* The process's mapping of the segment behind seg_fd (size bytes, checked
 * against the fd by the caller) as node incarnation handed it out,
 * read-write and shared, made and queued for warming when new (at most
 * mbps MB/s; 0 = SHM_WARM_DEFAULT_MBPS). A node restarted (another
 * incarnation) is mapped anew even on the same file: nothing of the old
 * process's mapping, warm state included, carries over to the new one.
 * Every get is paired with one shm_map_put. NULL with a reason in why. */
#define SHM_WARM_DEFAULT_MBPS 1024
shm_map *shm_map_get(int seg_fd, uint64_t size, uint64_t incarnation, int mbps, char *why, size_t whylen);
void shm_map_put(shm_map *m);
/* The segment's owner: the node process pid (the peer of the socket that
 * handed it out). When it exits the mapping is dropped (above) within
 * SHM_WATCH_MS. Where the process cannot be watched (pid 0, no pidfd
 * support) nothing changes. */
#define SHM_WATCH_MS 250
void shm_map_watch(shm_map *m, int pid);
/* 1 once the owner exited and the mapping was dropped. */
int shm_map_dead(const shm_map *m);

char *shm_map_base(const shm_map *m);
/* The mapping's own fd of the segment (for pread/pwrite while chunks are
 * cold; the paths of it share it, it closes with the mapping). */
int shm_map_fd(const shm_map *m);

/* A transfer is about to ask shm_map_ready (once per batch: the sweep
 * leaves a mapping in use alone). */
void shm_map_used(shm_map *m);
/* 1 when [off, off+len) may be copied through the mapping now: its chunks
 * are warm (else the warmer takes its first cold chunk next). */
int shm_map_ready(shm_map *m, uint64_t off, uint64_t len);

/* Bytes not warm yet: of one mapping, and of all this process holds. */
uint64_t shm_map_cold_bytes(const shm_map *m);
uint64_t shm_maps_cold_bytes(void);

#endif
