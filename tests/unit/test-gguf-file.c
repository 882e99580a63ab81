/*
 * Unit tests for lib/model/gguf.c on files: opened from disk, and the pages of
 * tensors dropped once read (gguf-img.c writes the images).
 *
 * With GGUF_SEED_DIR set, test_write_seeds also writes the good images
 * there (that is how tests/fuzz/corpus/gguf was made).
 */
#include <sys/mman.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gguf-img.h"
#include "sotto.h"

static char *
tmp_write(const void *p, size_t n)
{
	char *path = strdup("/tmp/test-gguf-XXXXXX");
	int fd;

	assert_non_null(path);
	assert_true((fd = mkstemp(path)) != -1);
	assert_int_equal(write(fd, p, n), (ssize_t)n);
	close(fd);
	return path;
}

static void
test_open_file(void **state)
{
	char err[SOTTO_ERR_MAX] = "", *path;
	struct img b = { 0 };
	struct gguf *g;
	uint32_t u;

	img_good(&b, 3, 32);
	path = tmp_write(b.p, b.len);
	assert_int_equal(gguf_open(path, &g, err), 0);
	assert_string_equal(gguf_path(g), path);
	assert_int_equal(gguf_get_u32(g, "whisper.n_mels", &u, err), 0);
	assert_int_equal(u, 80);
	assert_int_equal(((uintptr_t)gguf_tensor_at(g, 1)->data) % 32, 0);
	assert_int_equal(gguf_get_u32(g, "nope", &u, err), SOTTO_EFORMAT);
	assert_true(strncmp(err, path, strlen(path)) == 0);
	gguf_close(g);
	unlink(path);
	free(path);

	path = tmp_write(b.p, b.len - 1);
	assert_int_equal(gguf_open(path, &g, err), SOTTO_EFORMAT);
	assert_true(strncmp(err, path, strlen(path)) == 0);
	unlink(path);
	free(path);

	path = tmp_write("", 0);
	assert_int_equal(gguf_open(path, &g, err), SOTTO_EFORMAT);
	assert_non_null(strstr(err, ": empty file"));
	unlink(path);
	assert_int_equal(gguf_open(path, &g, err), SOTTO_EIO);
	assert_true(strncmp(err, path, strlen(path)) == 0);
	assert_non_null(strstr(err, "No such file"));
	free(path);
	assert_int_equal(gguf_open("/tmp", &g, err), SOTTO_EIO);
	assert_string_equal(err, "/tmp: not a regular file");
	free(b.p);
}

/* Pages of [p, p + n) resident now (mincore), of the whole pages in it. */
static int
resident_pages(const void *p, size_t n, int *whole)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), i;
	uintptr_t a = ((uintptr_t)p + page - 1) & ~(page - 1);
	uintptr_t e = ((uintptr_t)p + n) & ~(page - 1);
	unsigned char vec[64];
	int count = 0;

	*whole = e > a ? (int)((e - a) / page) : 0;
	assert_true(*whole <= 64);
	if (*whole == 0)
		return 0;
	assert_int_equal(mincore((void *)a, e - a, vec), 0);
	for (i = 0; i < (size_t)*whole; i++)
		count += vec[i] & 1;
	return count;
}

/* Byte i of a tensor written by img_fill, from the tensor's offset. */
static int
filled_as_written(const struct gguf_tensor *t, size_t offset)
{
	const unsigned char *p = t->data;
	size_t i;

	for (i = 0; i < t->nbytes; i++)
		if (p[i] != ((offset + i) & 0xff))
			return 0;
	return 1;
}

/*
 * gguf_drop gives a converted tensor's pages back at once (a load must
 * not hold the file and its conversion together), leaves its neighbours'
 * bytes alone, and refuses to drop a retained tensor or retain a
 * dropped one.
 */
static void
test_drop(void **state)
{
	static const uint64_t ne[] = { 8192 };	/* F16: 16 KiB each */
	char err[SOTTO_ERR_MAX] = "", *path;
	const struct gguf_tensor *a, *b, *c;
	struct img im = { 0 };
	struct gguf *g;
	int n, whole, local = 0;

	img_header(&im, 3, 3, 0);
	img_tensor(&im, "a", 1, ne, GGUF_DTYPE_F16, 0);
	img_tensor(&im, "b", 1, ne, GGUF_DTYPE_F16, 16384);
	img_tensor(&im, "c", 1, ne, GGUF_DTYPE_F16, 32768);
	img_pad(&im, 32);
	img_fill(&im, 3 * 16384);
	path = tmp_write(im.p, im.len);
	assert_int_equal(gguf_open(path, &g, err), 0);
	a = gguf_find_tensor(g, "a");
	b = gguf_find_tensor(g, "b");
	c = gguf_find_tensor(g, "c");
	assert_true(a != NULL && b != NULL && c != NULL);
	n = resident_pages(b->data, b->nbytes, &whole);
	assert_true(whole >= 3);
	assert_int_equal(n, whole);

	assert_int_equal(gguf_drop(g, (const char *)b->data + 100), 0);
	assert_int_equal(resident_pages(b->data, b->nbytes, &whole), 0);
	assert_true(filled_as_written(a, 0));
	assert_true(filled_as_written(c, 32768));
	assert_int_equal(gguf_retain(g, b->data), SOTTO_EINVAL);
	assert_int_equal(gguf_retain(g, a->data), 0);
	assert_int_equal(gguf_drop(g, a->data), SOTTO_EINVAL);
	assert_int_equal(gguf_drop(g, &local), SOTTO_EINVAL);

	gguf_release(g);
	assert_non_null(gguf_find_tensor(g, "a")->data);
	assert_true(filled_as_written(a, 0));
	assert_null(gguf_find_tensor(g, "b")->data);
	assert_null(gguf_find_tensor(g, "c")->data);
	gguf_close(g);
	unlink(path);
	free(path);
	free(im.p);
}

static void
seed_write(const char *dir, const char *name, const struct img *b)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(b->p, 1, b->len, f), b->len);
	fclose(f);
	free(b->p);
}

static void
test_write_seeds(void **state)
{
	static const uint64_t ne[] = { 2, 2, 2, 2 };
	const char *dir = getenv("GGUF_SEED_DIR");
	struct img b = { 0 };

	if (dir == NULL)
		return;
	img_good(&b, 3, 32);
	seed_write(dir, "good-v3", &b);
	memset(&b, 0, sizeof(b));
	img_good(&b, 2, 0);
	seed_write(dir, "good-v2-noalign", &b);
	memset(&b, 0, sizeof(b));
	img_good(&b, 3, 64);
	seed_write(dir, "good-align64", &b);
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 4, ne, GGUF_DTYPE_F16, 0, 32);
	seed_write(dir, "one-4d", &b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_open_file),
		cmocka_unit_test(test_drop),
		cmocka_unit_test(test_write_seeds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
