/* backend/shm_handoff.h - the shareable segment and the message that
 * hands it to a same-host client.
 *
 * The node's segment is a memfd. After a local client authenticates on
 * the node's unix socket, the node sends one message: "MKVS", its node
 * id, the segment size, and the fd as SCM_RIGHTS. The node's shm data
 * server (shm_server.h) sends it, the shm transport (shm_transport.h)
 * receives it. */
#ifndef MKV_SHM_HANDOFF_H
#define MKV_SHM_HANDOFF_H

#include <stddef.h>
#include <stdint.h>

/* A shareable segment (memfd + MAP_SHARED mapping); prefault touches
 * every page now. 0, or -1 with a message. */
int te_shm_segment_create(uint64_t size, int prefault, void **base, int *fd, char *err, size_t errlen);

typedef struct te_shm_hello {
    uint32_t node_id;
    uint64_t size;
    uint64_t incarnation;   /* 0 from a node before incarnations */
} te_shm_hello;

/* Node side: the hello and the fd. 0, or -1 with errno. */
int te_shm_send_segment(int sock, int seg_fd, const te_shm_hello *h, int timeout_ms);
/* Client side: the fd (close-on-exec) and the hello. 0, or -1 with
 * errno (EPROTO for a malformed message). */
int te_shm_recv_segment(int sock, int *seg_fd, te_shm_hello *h, int timeout_ms);

#endif
