/*
 * sottod's memory: what it keeps after sessions end must not depend on
 * how many there were (docs/architecture.md, "Memory").
 *
 * The engine maps each stream's big buffers on its own (lib/kernels/bigmem.h);
 * what is left is the daemon's own medium buffers (pending audio, the
 * resampler's output, event buffers), allocated on the loop thread and
 * freed on either thread. glibc's mmap threshold is dynamic: the first
 * free of a mapped chunk raises it to that chunk's size (up to 32 MiB),
 * after which chunks that size come from arena heaps, which are given
 * back only from their top. Setting the threshold fixes it (and the trim
 * threshold with it) for the life of the process. When the last stream
 * is gone, malloc_trim gives back the free pages inside the arenas as
 * well (the small allocations of the loop, compute and OpenMP threads),
 * and so it does when a door has freed an upload (core_trim_memory):
 * libevent reads one into buffers of a few KiB each, which a 25 MB body
 * leaves as 25 MB of free chunks in the loop thread's arena.
 */
#include <malloc.h>

#include "log.h"
#include "core.h"
#include "core-private.h"

#define MEM_MMAP_THRESHOLD	(128 * 1024)	/* glibc starts with it */

/* Before anything big is allocated (the model). */
void
mem_init(void)
{
	if (mallopt(M_MMAP_THRESHOLD, MEM_MMAP_THRESHOLD) != 1)
		log_warnx("mallopt(M_MMAP_THRESHOLD) failed; memory of "
		    "ended sessions may stay with sottod");
}

/* No stream is left (compute thread): give the free memory back. */
void
mem_idle(void)
{
	malloc_trim(0);
	log_debug("memory: no stream left, free pages given back");
}

/* Loop thread: a door freed a big buffer. */
void
core_trim_memory(void)
{
	malloc_trim(0);
}
