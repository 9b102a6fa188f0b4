/* core/memwarm.h - pay a buffer's first-copy cost up front.
 *
 * The first time the kernel copies to or from a page through a process's
 * address (send, recv, pread, pwrite), some virtual machines trap to the
 * hypervisor to build a shadow mapping for it: microseconds per 4 KiB
 * page, an order of magnitude slower than the copy itself. A node's
 * segment and a client's registered buffers are long-lived and are
 * exactly what the kernel copies, so they are warmed once, when created or
 * registered, instead of inside the first transfers (as registering
 * memory for RDMA pins it up front). On bare metal this is one cheap
 * read pass. The bytes are only read, never changed. */
#ifndef MKV_MEMWARM_H
#define MKV_MEMWARM_H

#include <stddef.h>

/* Lets the kernel read every page of [addr, addr+len) once, through a
 * pipe into a scratch buffer; other threads may write the bytes meanwhile. 0, or -1 when no pipe could be made (the
 * buffer is untouched then and still works, only colder), or -1 with
 * errno EFAULT when part of the buffer cannot be read. */
int memwarm_kernel(const void *addr, size_t len);

/* One load from every page of [addr, addr+len), warming the pages for
 * this process's own accesses. The loads are hidden from the compiler and
 * the sanitizers: they read bytes another thread or process may be
 * writing, which only matters for timing. */
void memwarm_touch(const void *addr, size_t len);

#endif
