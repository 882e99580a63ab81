/*
 * The GGUF writer of tests/unit (gguf-img.h): little-endian fields into a
 * growing buffer, and the checks that parse an image as an exactly sized
 * heap copy so ASan sees any overread.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gguf-img.h"
#include "sotto.h"

void
img_put(struct img *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2 + 64;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

/* Little-endian n-byte integer (tests run on little-endian hosts too). */
void
img_int(struct img *b, uint64_t v, size_t n)
{
	unsigned char c[8];
	size_t i;

	for (i = 0; i < n; i++)
		c[i] = (unsigned char)(v >> (8 * i));
	img_put(b, c, n);
}

void
img_str(struct img *b, const char *s)
{
	img_int(b, strlen(s), 8);
	img_put(b, s, strlen(s));
}

void
img_header(struct img *b, uint32_t version, uint64_t n_tensors,
    uint64_t n_kv)
{
	img_put(b, "GGUF", 4);
	img_int(b, version, 4);
	img_int(b, n_tensors, 8);
	img_int(b, n_kv, 8);
}

/* A scalar key of type t holding the low bytes of v. */
void
img_kv(struct img *b, const char *key, enum gguf_type t, uint64_t v)
{
	static const size_t bytes[] = { 1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8 };

	img_str(b, key);
	img_int(b, t, 4);
	img_int(b, v, bytes[t]);
}

void
img_kv_str(struct img *b, const char *key, const char *s)
{
	img_str(b, key);
	img_int(b, GGUF_TYPE_STRING, 4);
	img_str(b, s);
}

/* An array header; the caller writes the n elements. */
void
img_kv_arr(struct img *b, const char *key, enum gguf_type t, uint64_t n)
{
	img_str(b, key);
	img_int(b, GGUF_TYPE_ARRAY, 4);
	img_int(b, t, 4);
	img_int(b, n, 8);
}

/* A tensor info; ne is in GGUF order (innermost first). */
void
img_tensor(struct img *b, const char *name, uint32_t n_dims,
    const uint64_t *ne, uint32_t type, uint64_t offset)
{
	uint32_t i;

	img_str(b, name);
	img_int(b, n_dims, 4);
	for (i = 0; i < n_dims; i++)
		img_int(b, ne[i], 8);
	img_int(b, type, 4);
	img_int(b, offset, 8);
}

void
img_pad(struct img *b, size_t align)
{
	while (b->len % align != 0)
		img_int(b, 0, 1);
}

void
img_fill(struct img *b, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		img_int(b, i & 0xff, 1);
}

/*
 * A good file: 9 keys (alignment 32 when align != 0) and two tensors,
 * mel.filters F32 [2][3] at 0 and enc.conv1.b F16 [5] at 32. The file
 * ends exactly at the last tensor byte.
 */
void
img_good(struct img *b, uint32_t version, uint32_t align)
{
	static const uint64_t ne_a[] = { 3, 2 }, ne_b[] = { 5 };
	size_t a = align != 0 ? align : 32;

	img_header(b, version, 2, align != 0 ? 9 : 8);
	img_kv_str(b, "general.architecture", "whisper");
	if (align != 0)
		img_kv(b, "general.alignment", GGUF_TYPE_UINT32, align);
	img_kv(b, "whisper.n_mels", GGUF_TYPE_UINT32, 80);
	img_kv(b, "small.u8", GGUF_TYPE_UINT8, 7);
	img_kv(b, "neg.i8", GGUF_TYPE_INT8, 0xff);
	img_kv(b, "big.u64", GGUF_TYPE_UINT64, 1ull << 40);
	img_kv_arr(b, "whisper.suppress_tokens", GGUF_TYPE_INT32, 3);
	img_int(b, 1, 4);
	img_int(b, (uint32_t)-2, 4);
	img_int(b, 220, 4);
	img_kv_arr(b, "whisper.suppress_begin", GGUF_TYPE_UINT16, 2);
	img_int(b, 220, 2);
	img_int(b, 50256, 2);
	img_kv_arr(b, "whisper.languages", GGUF_TYPE_STRING, 3);
	img_str(b, "en");
	img_str(b, "zh");
	img_str(b, "");
	img_tensor(b, "mel.filters", 2, ne_a, GGUF_DTYPE_F32, 0);
	img_tensor(b, "enc.conv1.b", 1, ne_b, GGUF_DTYPE_F16, a);
	img_pad(b, a);
	img_fill(b, 24);
	img_pad(b, a);
	img_fill(b, 10);
}

/* Parse an exactly sized heap copy, so ASan sees any overread. */
int
img_open(const struct img *b, size_t len, struct gguf **g, char *err)
{
	void *copy = malloc(len > 0 ? len : 1);
	int rv;

	assert_non_null(copy);
	memcpy(copy, b->p, len);
	rv = gguf_open_memory(copy, len, g, err);
	if (rv == 0)
		gguf_close(*g);
	free(copy);
	return rv;
}

/* Expect SOTTO_EFORMAT with want in the message; frees b. */
void
img_expect_fail(struct img *b, const char *want)
{
	char err[SOTTO_ERR_MAX] = "";
	struct gguf *g = NULL;

	assert_int_equal(img_open(b, b->len, &g, err), SOTTO_EFORMAT);
	if (strstr(err, want) == NULL)
		fail_msg("message \"%s\" lacks \"%s\"", err, want);
	free(b->p);
}

/* The common prefix of a file with one tensor of the given shape. */
void
img_one_tensor(struct img *b, uint32_t n_dims, const uint64_t *ne,
    uint32_t type, uint64_t offset, size_t data)
{
	img_header(b, 3, 1, 0);
	img_tensor(b, "t", n_dims, ne, type, offset);
	img_pad(b, 32);
	img_fill(b, data);
}

