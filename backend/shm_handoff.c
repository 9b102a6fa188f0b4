/* backend/shm_handoff.c - see shm_handoff.h. */
#include "backend/shm_handoff.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend/le.h"
#include "backend/netio.h"

#define HELLO_LEN      24            /* "MKVS" node_id u32 size u64 incarnation u64 */
#define HELLO_LEN_V1   16            /* before incarnations */

int te_shm_segment_create(uint64_t size, int prefault, void **base, int *fd, char *err, size_t errlen) {
    int f = memfd_create("moonkv-segment", MFD_CLOEXEC);
    if (f < 0 || ftruncate(f, (off_t)size) < 0) {
        snprintf(err, errlen, "segment: memfd of %llu bytes: %s", (unsigned long long)size, strerror(errno));
        if (f >= 0) close(f);
        return -1;
    }
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | (prefault ? MAP_POPULATE : 0), f, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "segment: mmap: %s", strerror(errno));
        close(f);
        return -1;
    }
    *base = p;
    *fd = f;
    return 0;
}

int te_shm_send_segment(int sock, int seg_fd, const te_shm_hello *h, int timeout_ms) {
    uint8_t hello[HELLO_LEN];
    memcpy(hello, "MKVS", 4);
    le_put32(hello + 4, h->node_id);
    le_put64(hello + 8, h->size);
    le_put64(hello + 16, h->incarnation);
    char ctl[CMSG_SPACE(sizeof(int))] = { 0 };
    struct iovec iov = { hello, sizeof hello };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &seg_fd, sizeof(int));
    if (te_wait_fd(sock, POLLOUT, te_deadline(timeout_ms)) < 0) return -1;
    return sendmsg(sock, &m, MSG_NOSIGNAL) == (ssize_t)sizeof hello ? 0 : -1;
}

int te_shm_recv_segment(int fd, int *seg_fd, te_shm_hello *h, int timeout_ms) {
    uint8_t hello[HELLO_LEN];
    char ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { hello, sizeof hello };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    if (te_wait_fd(fd, POLLIN, te_deadline(timeout_ms)) < 0) return -1;
    ssize_t r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
    struct cmsghdr *c = r == HELLO_LEN || r == HELLO_LEN_V1 ? CMSG_FIRSTHDR(&m) : NULL;
    if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)) || memcmp(hello, "MKVS", 4)) {
        if (c && c->cmsg_type == SCM_RIGHTS) { int f; memcpy(&f, CMSG_DATA(c), sizeof f); close(f); }
        errno = EPROTO;
        return -1;
    }
    memcpy(seg_fd, CMSG_DATA(c), sizeof(int));
    h->node_id = le_get32(hello + 4);
    h->size = le_get64(hello + 8);
    h->incarnation = r == HELLO_LEN ? le_get64(hello + 16) : 0;
    return 0;
}
