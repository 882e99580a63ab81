/*
 * A GGUF file in memory of our own, and what of it outlives a model load.
 *
 * The file is read (read(2)) into an anonymous mapping rather than mapped
 * itself. A mapped file is only borrowed: truncate it while the program
 * runs and the next read of a page past the new end is SIGBUS, and `cp
 * new.gguf model.gguf` (which truncates, then writes) or a package
 * upgrade did just that to a running sottod; even a MAP_PRIVATE page
 * already copied is dropped by a truncate. Memory of our own changes
 * only when we change it.
 *
 * Most tensors are read once, at load, to be converted into the buffers
 * the kernels use; the loader gguf_retain()s those it still reads
 * afterwards (vectors, positions, the token embedding), and
 * gguf_release() gives the rest back: every page that holds only
 * tensors nobody retained is unmapped. The header (keys, values, the
 * tokenizer's strings, tensor names) stays. So that a load does not
 * hold the whole file and all it was converted into at once (twice
 * the model: 3.2 GB for large-v3-turbo), the loader gguf_drop()s each
 * tensor as soon as it is converted: its pages go back at once.
 */
#include <sys/mman.h>
#include <sys/stat.h>

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "err.h"
#include "gguf.h"

#include "gguf-private.h"

/* Read all of fd (size bytes by fstat) into base. */
static int
gguf_read_all(int fd, const char *path, unsigned char *base, size_t size,
    char *err)
{
	size_t at = 0;
	ssize_t n;

	while (at < size) {
		n = read(fd, base + at, size - at);
		if (n == -1 && errno == EINTR)
			continue;
		if (n == -1)
			return err_set(err, SOTTO_EIO, "%s: read: %s", path,
			    strerror(errno));
		if (n == 0)
			return err_set(err, SOTTO_EIO, "%s: the file shrank "
			    "from %zu to %zu bytes while it was read (being "
			    "replaced?); try again", path, size, at);
		at += (size_t)n;
	}
	return 0;
}

int
gguf_open(const char *path, struct gguf **ret, char *err)
{
	struct stat st;
	void *p;
	int fd, rc;

	*ret = NULL;
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) == -1)
		return err_set(err, SOTTO_EIO, "%s: %s", path, strerror(errno));
	if (fstat(fd, &st) == -1 || !S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(err, SOTTO_EIO, "%s: not a regular file", path);
	}
	if (st.st_size == 0 || (uint64_t)st.st_size > SIZE_MAX) {
		close(fd);
		return err_set(err, SOTTO_EFORMAT, "%s: %s", path,
		    st.st_size == 0 ? "empty file" : "file too large");
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
	    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return err_set(err, SOTTO_ENOMEM, "%s: no memory for its %zu "
		    "bytes", path, (size_t)st.st_size);
	}
	rc = gguf_read_all(fd, path, p, (size_t)st.st_size, err);
	close(fd);
	/* read-only from here on, as the file would be */
	if (rc == 0 && mprotect(p, (size_t)st.st_size, PROT_READ) != 0)
		rc = err_set(err, SOTTO_EIO, "%s: mprotect: %s", path,
		    strerror(errno));
	if (rc != 0) {
		munmap(p, (size_t)st.st_size);
		return rc;
	}
	return gguf_load(path, p, (size_t)st.st_size, 1, ret, err);
}

/* The index of the tensor whose data holds p, or -1. */
static ssize_t
gguf_holder(const struct gguf *g, const void *data)
{
	const unsigned char *p = data;
	size_t i;

	for (i = 0; i < g->n_tensors; i++) {
		const unsigned char *d = g->tensors[i].data;

		if (d != NULL && p >= d && p < d + g->tensors[i].nbytes)
			return (ssize_t)i;
	}
	return -1;
}

/* Mark tensor i as what (GGUF_RETAINED, GGUF_DROPPED): 0 or ENOMEM. */
static int
gguf_mark(struct gguf *g, size_t i, unsigned char what)
{
	if (g->retained == NULL &&
	    (g->retained = calloc(g->n_tensors + 1, 1)) == NULL)
		return err_set(NULL, SOTTO_ENOMEM, "out of memory");
	g->retained[i] = what;
	return 0;
}

int
gguf_retain(struct gguf *g, const void *data)
{
	ssize_t i = gguf_holder(g, data);

	if (i < 0 || (g->retained != NULL && g->retained[i] == GGUF_DROPPED))
		return SOTTO_EINVAL;
	return gguf_mark(g, (size_t)i, GGUF_RETAINED);
}

int
gguf_drop(struct gguf *g, const void *data)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), start, end;
	ssize_t i = gguf_holder(g, data);
	const struct gguf_tensor *t;
	int rc;

	if (i < 0 || (g->retained != NULL && g->retained[i] == GGUF_RETAINED))
		return SOTTO_EINVAL;
	if ((rc = gguf_mark(g, (size_t)i, GGUF_DROPPED)) != 0 || !g->mapped)
		return rc;
	/* only the pages wholly inside it: its neighbours may be kept */
	t = &g->tensors[i];
	start = ((size_t)((const unsigned char *)t->data - g->base) + page -
	    1) & ~(page - 1);
	end = ((size_t)((const unsigned char *)t->data - g->base) +
	    t->nbytes) & ~(page - 1);
	/* the range stays mapped (zeros if read): gguf_release unmaps it */
	if (end > start)
		madvise((unsigned char *)g->base + start, end - start,
		    MADV_DONTNEED);
	return 0;
}

/* Retained byte ranges (and the header), sorted by start. */
static int
gguf_span_cmp(const void *a, const void *b)
{
	size_t x = ((const struct gguf_span *)a)->start;
	size_t y = ((const struct gguf_span *)b)->start;

	return (x > y) - (x < y);
}

/*
 * The pages of g's memory that hold retained bytes (or the header), as
 * sorted, disjoint page ranges into s (room for n_tensors + 1); returns
 * how many.
 */
static size_t
gguf_kept_pages(struct gguf *g, struct gguf_span *s, size_t page)
{
	size_t i, n = 0, k;

	s[n++] = (struct gguf_span){ 0, g->data_start };
	for (i = 0; i < g->n_tensors; i++) {
		const struct gguf_tensor *t = &g->tensors[i];
		size_t off = (const unsigned char *)t->data - g->base;

		if (g->retained != NULL && g->retained[i] == GGUF_RETAINED)
			s[n++] = (struct gguf_span){ off, off + t->nbytes };
	}
	for (i = 0; i < n; i++) {
		s[i].start &= ~(page - 1);
		s[i].end = (s[i].end + page - 1) & ~(page - 1);
	}
	qsort(s, n, sizeof(*s), gguf_span_cmp);
	for (i = 1, k = 0; i < n; i++) {
		if (s[i].start <= s[k].end) {
			if (s[i].end > s[k].end)
				s[k].end = s[i].end;
		} else
			s[++k] = s[i];
	}
	return k + 1;
}

void
gguf_release(struct gguf *g)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), i, n, at = 0;
	size_t end = (g->size + page - 1) & ~(page - 1);
	struct gguf_span *s;

	if (!g->mapped || g->released)
		return;
	if ((s = calloc(g->n_tensors + 1, sizeof(*s))) == NULL)
		return;		/* keeps all: costs memory, not safety */
	n = gguf_kept_pages(g, s, page);
	for (i = 0; i < n; i++) {
		if (s[i].start > at)
			munmap((unsigned char *)g->base + at, s[i].start - at);
		at = s[i].end;
	}
	if (end > at)
		munmap((unsigned char *)g->base + at, end - at);
	for (i = 0; i < g->n_tensors; i++)
		if (g->retained == NULL || g->retained[i] != GGUF_RETAINED)
			g->tensors[i].data = NULL;
	g->kept = s;
	g->n_kept = n;
	g->released = 1;
}

/*
 * Unmap what is left of g's memory: after gguf_release() only the kept
 * pages, since the kernel may have given the others to new mappings.
 */
void
gguf_unmap(struct gguf *g)
{
	size_t i;

	if (!g->mapped)
		return;
	if (!g->released) {
		munmap((void *)g->base, g->size);
		return;
	}
	for (i = 0; i < g->n_kept; i++)
		munmap((unsigned char *)g->base + g->kept[i].start,
		    g->kept[i].end - g->kept[i].start);
	free(g->kept);
	g->kept = NULL;
}
