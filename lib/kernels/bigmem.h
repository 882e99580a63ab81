/*
 * Large per-stream buffers straight from the kernel (bigmem.c).
 *
 * A stream's buffers (sotto_state's activations and caches, its audio)
 * are megabytes each and live as long as the stream. From malloc they
 * would outlive it: once glibc frees one mmapped chunk it raises its mmap
 * threshold to that chunk's size, later buffers of that size come from
 * the allocating thread's arena, and an arena heap is given back only
 * from its top, so a burst of streams left gigabytes behind in sottod
 * (docs/architecture.md, "Memory"). Each buffer here is its own anonymous
 * mapping, unmapped when freed: memory follows the streams open now,
 * whatever the host program's malloc does.
 *
 * Under AddressSanitizer the buffers come from malloc instead, so that
 * overruns and leaks of them are still caught.
 *
 * Alignment: 64 bytes. Contents of a new buffer are undefined.
 */
#ifndef SOTTO_BIGMEM_H
#define SOTTO_BIGMEM_H

#include <stddef.h>

/* n bytes (n > 0), or NULL when out of memory. */
void	*bigmem_alloc(size_t n);
/*
 * Grow or shrink p (NULL: allocate) to n bytes, keeping the first
 * min(old, n); NULL when out of memory, and p is then unchanged.
 */
void	*bigmem_realloc(void *p, size_t n);
/* Give p back to the kernel; NULL does nothing. */
void	 bigmem_free(void *p);

#endif
