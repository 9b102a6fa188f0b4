/* node/segment.h - the memory a node contributes to the cluster.
 *
 * One contiguous mapping, shareable through a memfd so same-host peers
 * can map it (shm transport). Pages are faulted in at start-up so the
 * first put into fresh memory runs at full speed instead of paying a
 * page fault per 4 KiB. */
#ifndef MKV_NODE_SEGMENT_H
#define MKV_NODE_SEGMENT_H

#include <stddef.h>
#include <stdint.h>

typedef struct node_segment {
    void *base;
    uint64_t size;
    int fd;                  /* memfd (or file, persist.h) behind base, -1 if anonymous */
    const char *backing;     /* "hugetlb", "memfd", "anonymous", "file", "hugetlbfs-file" */
    uint64_t prefault_ms;    /* time spent faulting pages in */
} node_segment;

/* 0, or -1 with a message in err. */
int node_segment_create(node_segment *s, uint64_t size, int prefault, char *err, size_t errlen);
void node_segment_destroy(node_segment *s);
/* Every page mapped writable (bytes already in a file stay), then
 * warmed for the kernel's copies (memwarm.h); populate: mapped only. */
void node_segment_prefault(node_segment *s);
void node_segment_populate(node_segment *s);

#endif
