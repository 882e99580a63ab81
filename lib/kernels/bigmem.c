/*
 * Large per-stream buffers as anonymous mappings (see bigmem.h for why).
 *
 * A buffer is a mapping whose first BIGMEM_HEAD bytes hold its length;
 * the caller's pointer follows them, so it is 64-byte aligned and free
 * needs no size. Growing uses mremap, which moves the pages instead of
 * copying them.
 */
#include <sys/mman.h>

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bigmem.h"

#if defined(__SANITIZE_ADDRESS__)
#define BIGMEM_MALLOC	1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BIGMEM_MALLOC	1
#endif
#endif

#define BIGMEM_HEAD	64

#ifdef BIGMEM_MALLOC

void *
bigmem_alloc(size_t n)
{
	return aligned_alloc(BIGMEM_HEAD, (n + BIGMEM_HEAD - 1) &
	    ~(size_t)(BIGMEM_HEAD - 1));
}

void *
bigmem_realloc(void *p, size_t n)
{
	size_t old;
	void *q;

	if (p == NULL)
		return bigmem_alloc(n);
	/* realloc would keep only malloc's 16-byte alignment */
	if ((q = bigmem_alloc(n)) == NULL)
		return NULL;
	old = malloc_usable_size(p);
	memcpy(q, p, old < n ? old : n);
	free(p);
	return q;
}

void
bigmem_free(void *p)
{
	free(p);
}

#else

/* Mapping length for n bytes after the head; 0 when it overflows. */
static size_t
bigmem_len(size_t n)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	if (n > SIZE_MAX - BIGMEM_HEAD - page)
		return 0;
	return (n + BIGMEM_HEAD + page - 1) & ~(page - 1);
}

void *
bigmem_alloc(size_t n)
{
	size_t len = bigmem_len(n);
	unsigned char *base;

	if (len == 0)
		return NULL;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return NULL;
	memcpy(base, &len, sizeof(len));
	return base + BIGMEM_HEAD;
}

void *
bigmem_realloc(void *p, size_t n)
{
	unsigned char *base;
	size_t old, len = bigmem_len(n);

	if (p == NULL)
		return bigmem_alloc(n);
	if (len == 0)
		return NULL;
	base = (unsigned char *)p - BIGMEM_HEAD;
	memcpy(&old, base, sizeof(old));
	if (len == old)
		return p;
	base = mremap(base, old, len, MREMAP_MAYMOVE);
	if (base == MAP_FAILED)
		return NULL;
	memcpy(base, &len, sizeof(len));
	return base + BIGMEM_HEAD;
}

void
bigmem_free(void *p)
{
	unsigned char *base;
	size_t len;

	if (p == NULL)
		return;
	base = (unsigned char *)p - BIGMEM_HEAD;
	memcpy(&len, base, sizeof(len));
	munmap(base, len);
}

#endif
