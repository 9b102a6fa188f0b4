/* node/segment.c - see segment.h.
 *
 * Preference: explicit huge pages (when enough are reserved), then a
 * plain memfd with transparent huge pages asked for, then anonymous
 * memory (no shm export). Prefaulting populates with MADV_POPULATE_WRITE
 * where the kernel has it (touches every page otherwise), then warms the
 * pages for the kernel's copies (memwarm.h). */
#include "node/segment.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/shm_handoff.h"
#include "core/log.h"
#include "core/memwarm.h"
#include "core/util.h"

#ifndef MFD_HUGETLB
#define MFD_HUGETLB 0x0004U
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#define HUGE_PAGE (2ULL << 20)

/* Free 2 MiB huge pages the system has reserved (0 if unknown). */
static uint64_t free_huge_pages(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[128];
    unsigned long long n = 0, kb = 0;
    while (fgets(line, sizeof line, f)) {
        sscanf(line, "HugePages_Free: %llu", &n);
        sscanf(line, "Hugepagesize: %llu kB", &kb);
    }
    fclose(f);
    return kb * 1024 == HUGE_PAGE ? n : 0;
}

static int try_hugetlb(node_segment *s, uint64_t size) {
    if (size % HUGE_PAGE || free_huge_pages() < size / HUGE_PAGE) return -1;
    int fd = memfd_create("moonkv-segment", MFD_CLOEXEC | MFD_HUGETLB);
    if (fd < 0) return -1;
    void *p = MAP_FAILED;
    if (ftruncate(fd, (off_t)size) == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return -1;
    }
    s->base = p;
    s->fd = fd;
    s->backing = "hugetlb";
    return 0;
}

static int try_anonymous(node_segment *s, uint64_t size, char *err, size_t errlen) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        snprintf(err, errlen, "cannot map a segment of %llu bytes: %s", (unsigned long long)size,
                 strerror(errno));
        return -1;
    }
    s->base = p;
    s->fd = -1;
    s->backing = "anonymous";
    return 0;
}

/* Allocates every page, then warms them for the kernel: the node itself
 * never touches segment bytes, every byte moves through send/recv (or
 * pread/pwrite of shm peers, or the NIC), so the kernel's first copy is
 * the one worth paying here rather than inside the first puts. */
void node_segment_populate(node_segment *s) {
    if (madvise(s->base, s->size, MADV_POPULATE_WRITE) != 0) {
        long pg = sysconf(_SC_PAGESIZE);
        volatile char *p = s->base;
        for (uint64_t off = 0; off < s->size; off += (uint64_t)pg) p[off] = p[off];   /* keeps a file's bytes */
    }
}

void node_segment_prefault(node_segment *s) {
    node_segment_populate(s);
    (void)memwarm_kernel(s->base, s->size);
}

int node_segment_create(node_segment *s, uint64_t size, int want_prefault, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    s->size = size;
    s->fd = -1;
    uint64_t t0 = mono_us();
    if (try_hugetlb(s, size) == 0) {
        /* MAP_POPULATE already faulted every huge page in. */
    } else {
        char why[256];
        void *base;
        int fd;
        if (te_shm_segment_create(size, 0, &base, &fd, why, sizeof why) == 0) {
            s->base = base;
            s->fd = fd;
            s->backing = "memfd";
        } else {
            log_warning("segment: %s; using anonymous memory (no shm export)", why);
            if (try_anonymous(s, size, err, errlen) != 0) return -1;
        }
        /* Before the first touch, or the pages are already small. */
        madvise(s->base, size, MADV_HUGEPAGE);
        if (want_prefault) node_segment_prefault(s);
    }
    s->prefault_ms = (mono_us() - t0) / 1000;
    log_notice("segment: %llu bytes (%s), %s in %llu ms", (unsigned long long)size, s->backing,
               want_prefault || s->backing[0] == 'h' ? "prefaulted" : "mapped",
               (unsigned long long)s->prefault_ms);
    return 0;
}

void node_segment_destroy(node_segment *s) {
    if (s->base) munmap(s->base, s->size);
    if (s->fd >= 0) close(s->fd);
    s->base = NULL;
    s->fd = -1;
}
