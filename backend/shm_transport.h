/* backend/shm_transport.h - shared memory for peers on the node's host.
 *
 * The node's segment is a memfd. Its shm data server (shm_server.h)
 * listens on a unix socket: a local client authenticates with the
 * cluster secret and receives the segment fd (shm_handoff.h). Then, by
 * te_config.shm_mode:
 *
 * TE_SHM_MAP (default): the client maps the segment read-write (one
 * mapping per segment and process, shared by its transports, warmed in
 * the background: shm_maps.h) and copies into and out of the mapping
 * with crc32c_copy, so each completion carries the CRC32C of its bytes
 * (te_cqe.has_crc). The client checks every request against its
 * capability without the key (node, rights, expiry, range inside the cap
 * and the segment) and refuses what it does not cover; the node is not
 * asked, and could not police a mapping anyway. A request whose part of
 * the mapping is not warm yet goes the fd way below instead (no CRC),
 * so a fresh client's first transfers do not wait for a whole segment.
 *
 * TE_SHM_FD: data moves with pread/pwrite on the fd (the kernel's one
 * copy, split over helper threads for large reads). After the same local
 * checks each batch's request headers (wire.h, no payload) cross the
 * unix socket and the node verifies the MACs: only writes it accepted
 * are copied; reads are copied while it verifies and fail with its
 * verdict if it refuses, which hides the round trip behind the copy.
 *
 * A local peer holding the secret and the fd could bypass all of it, so
 * shm is for trusted same-host clients: the checks catch bugs and stale
 * placements, not a hostile process. Nothing but object bytes lives in
 * the segment, so a crashed client harms no metadata. */
#ifndef MKV_SHM_TRANSPORT_H
#define MKV_SHM_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

#include "backend/transport.h"

/* Peer address form: "unix:/tmp/x.sock" or "unix:@abstract-name". */
te_transport *te_shm_create(const te_config *cfg, char *err, size_t errlen);

/* Bytes of a map-mode path's mapping not warm yet (0 in fd mode), and of
 * all the mappings this process holds: safe from any thread. */
uint64_t te_shm_path_cold_bytes(const te_path *p);
uint64_t te_shm_cold_bytes(void);

#endif
