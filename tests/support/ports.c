/* tests/support/ports.c - free TCP ports for a test binary; see ports.h. */
#include "tests/support/ports.h"   /* support objects build without -Itests */

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* Below Linux's ephemeral range (32768-60999 by default), so a bind to
 * port 0 or an outgoing connection never takes one of ours. The same
 * blocks and locks as tests/support/ports.py (the Python and Tcl suites). */
#define PORTS_FIRST  13000
#define PORTS_BLOCKS 218      /* 218 * 32 ports: 13000-19975 */
#define PORTS_TRIES  200

static int bindable(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return 0;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

/* The block's lock stays held (its fd open) until the process exits, so
 * two binaries running side by side never share a block. */
static int lock_block(int block) {
    char path[64];
    snprintf(path, sizeof path, "/tmp/moonkv-ports-%d.lock", block);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int h_free_ports(int n) {
    if (n < 1 || n > H_PORTS_BLOCK) return -1;
    static int seeded;
    if (!seeded) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        srand((unsigned)(ts.tv_nsec ^ (getpid() << 16)));
        seeded = 1;
    }
    for (int t = 0; t < PORTS_TRIES; t++) {
        int block = rand() % PORTS_BLOCKS;
        int fd = lock_block(block);
        if (fd < 0) continue;
        int base = PORTS_FIRST + block * H_PORTS_BLOCK, ok = 1;
        for (int i = 0; i < H_PORTS_BLOCK && ok; i++) ok = bindable(base + i);
        if (ok) return base;   /* fd is kept: the lock lives as long as we do */
        close(fd);
    }
    return -1;
}

int h_free_port(void) { return h_free_ports(1); }
