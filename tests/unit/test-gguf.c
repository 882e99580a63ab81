/*
 * Unit tests for lib/model/gguf.c: small GGUF images built in memory
 * (gguf-img.c), good ones parsed and checked, corrupted ones rejected with
 * SOTTO_EFORMAT and a message saying what is wrong. Files on disk:
 * test-gguf-file.c.
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

static void
test_good(void **state)
{
	char err[SOTTO_ERR_MAX] = "";
	struct img b = { 0 };
	struct gguf *g;
	struct gguf_str s, *sa;
	const struct gguf_tensor *t;
	int32_t *ia;
	size_t n;
	uint32_t u;

	img_good(&b, 3, 32);
	assert_int_equal(gguf_open_memory(b.p, b.len, &g, err), 0);
	assert_int_equal(gguf_get_str(g, "general.architecture", &s, err), 0);
	assert_int_equal(s.len, 7);
	assert_memory_equal(s.ptr, "whisper", 7);
	assert_int_equal(gguf_get_u32(g, "whisper.n_mels", &u, err), 0);
	assert_int_equal(u, 80);
	assert_int_equal(gguf_get_u32(g, "small.u8", &u, err), 0);
	assert_int_equal(u, 7);
	assert_true(gguf_has_key(g, "big.u64"));
	assert_false(gguf_has_key(g, "big.u6"));
	assert_false(gguf_has_key(g, "big.u644"));

	assert_int_equal(gguf_get_i32_array(g, "whisper.suppress_tokens", &ia,
	    &n, err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(ia[0], 1);
	assert_int_equal(ia[1], -2);
	assert_int_equal(ia[2], 220);
	free(ia);
	assert_int_equal(gguf_get_i32_array(g, "whisper.suppress_begin", &ia,
	    &n, err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ia[1], 50256);
	free(ia);
	assert_int_equal(gguf_get_str_array(g, "whisper.languages", &sa, &n,
	    err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(sa[1].len, 2);
	assert_memory_equal(sa[1].ptr, "zh", 2);
	assert_int_equal(sa[2].len, 0);
	free(sa);

	assert_int_equal(gguf_n_tensors(g), 2);
	t = gguf_tensor_at(g, 0);
	assert_int_equal(t->name.len, 11);
	assert_memory_equal(t->name.ptr, "mel.filters", 11);
	assert_int_equal(t->type, GGUF_DTYPE_F32);
	assert_int_equal(t->n_dims, 2);
	assert_int_equal(t->dims[0], 2);	/* numpy order */
	assert_int_equal(t->dims[1], 3);
	assert_int_equal(t->nbytes, 24);
	assert_int_equal(((const unsigned char *)t->data - b.p) % 32, 0);
	assert_int_equal(((const unsigned char *)t->data)[5], 5);
	assert_null(gguf_tensor_at(g, 2));
	t = gguf_find_tensor(g, "enc.conv1.b");
	assert_ptr_equal(t, gguf_tensor_at(g, 1));
	assert_int_equal(t->type, GGUF_DTYPE_F16);
	assert_int_equal(t->nbytes, 10);
	assert_int_equal((const unsigned char *)t->data - b.p, b.len - 10);
	assert_null(gguf_find_tensor(g, "enc.conv1"));
	assert_string_equal(gguf_path(g), "<memory>");
	gguf_close(g);
	free(b.p);
}

static void
test_lookup_errors(void **state)
{
	char err[SOTTO_ERR_MAX] = "";
	struct img b = { 0 };
	struct gguf *g;
	struct gguf_str s, *sa;
	int32_t *ia;
	size_t n;
	uint32_t u;

	img_good(&b, 3, 32);
	assert_int_equal(gguf_open_memory(b.p, b.len, &g, err), 0);
	assert_int_equal(gguf_get_u32(g, "whisper.n_vocab", &u, err),
	    SOTTO_EFORMAT);
	/* run from the build tree: the source tree's command */
	assert_string_equal(err, "<memory>: key whisper.n_vocab is missing; "
	    "re-convert the model with scripts/fetch-model");
	assert_int_equal(gguf_get_u32(g, "general.architecture", &u, err),
	    SOTTO_EFORMAT);
	assert_string_equal(err, "<memory>: key general.architecture: "
	    "expected an integer, found string");
	assert_int_equal(gguf_get_str(g, "whisper.n_mels", &s, err),
	    SOTTO_EFORMAT);
	assert_string_equal(err, "<memory>: key whisper.n_mels: expected a "
	    "string, found u32");
	assert_int_equal(gguf_get_u32(g, "neg.i8", &u, err), SOTTO_EFORMAT);
	assert_non_null(strstr(err, "value -1 does not fit in u32"));
	assert_int_equal(gguf_get_u32(g, "big.u64", &u, err), SOTTO_EFORMAT);
	assert_non_null(strstr(err, "1099511627776 does not fit"));
	assert_int_equal(gguf_get_str_array(g, "whisper.suppress_tokens", &sa,
	    &n, err), SOTTO_EFORMAT);
	assert_non_null(strstr(err, "expected a string array, found array "
	    "of i32"));
	assert_int_equal(gguf_get_i32_array(g, "whisper.languages", &ia, &n,
	    err), SOTTO_EFORMAT);
	assert_non_null(strstr(err, "found array of string"));
	assert_int_equal(gguf_get_i32_array(g, "small.u8", &ia, &n, NULL),
	    SOTTO_EFORMAT);
	gguf_close(g);
	free(b.p);
}

static void
test_expect_tensor(void **state)
{
	static const int64_t good[] = { 2, 3 }, bad[] = { 2, 4 }, one[] = { 1 };
	char err[SOTTO_ERR_MAX] = "";
	const struct gguf_tensor *t = NULL;
	struct img b = { 0 };
	struct gguf *g;

	img_good(&b, 3, 32);
	assert_int_equal(gguf_open_memory(b.p, b.len, &g, err), 0);
	assert_int_equal(gguf_expect_tensor(g, "mel.filters", GGUF_DTYPE_F32,
	    2, good, &t, err), 0);
	assert_ptr_equal(t, gguf_tensor_at(g, 0));
	assert_int_equal(gguf_expect_tensor(g, "mel.filters", GGUF_DTYPE_F16,
	    2, bad, &t, err), SOTTO_EFORMAT);
	assert_string_equal(err, "<memory>: tensor mel.filters: expected F16 "
	    "[2][4], found F32 [2][3]");
	assert_int_equal(gguf_expect_tensor(g, "mel.filters", GGUF_DTYPE_F32,
	    1, one, NULL, err), SOTTO_EFORMAT);
	assert_string_equal(err, "<memory>: tensor mel.filters: expected F32 "
	    "[1], found F32 [2][3]");
	assert_int_equal(gguf_expect_tensor(g, "dec.ln.w", GGUF_DTYPE_F32,
	    1, one, NULL, err), SOTTO_EFORMAT);
	assert_string_equal(err, "<memory>: tensor dec.ln.w: missing "
	    "(expected F32 [1])");
	gguf_close(g);
	free(b.p);
}

static void
test_alignment(void **state)
{
	char err[SOTTO_ERR_MAX] = "";
	struct img b = { 0 };
	struct gguf *g;
	const struct gguf_tensor *t;
	static const uint32_t bad[] = { 0, 3, 48, 8192 };
	size_t i;

	img_good(&b, 3, 64);
	assert_int_equal(gguf_open_memory(b.p, b.len, &g, err), 0);
	t = gguf_tensor_at(g, 1);
	assert_int_equal(((const unsigned char *)t->data - b.p) % 64, 0);
	assert_int_equal((const unsigned char *)t->data - b.p, b.len - 10);
	gguf_close(g);
	free(b.p);

	/* Absent: 32. Version 2 reads the same. */
	memset(&b, 0, sizeof(b));
	img_good(&b, 2, 0);
	assert_int_equal(gguf_open_memory(b.p, b.len, &g, err), 0);
	t = gguf_tensor_at(g, 1);
	assert_int_equal((const unsigned char *)t->data - b.p, b.len - 10);
	gguf_close(g);
	free(b.p);

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		memset(&b, 0, sizeof(b));
		img_header(&b, 3, 0, 1);
		img_kv(&b, "general.alignment", GGUF_TYPE_UINT32, bad[i]);
		img_expect_fail(&b, "is not a power of two from 1 to 4096");
	}
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv_str(&b, "general.alignment", "32");
	img_expect_fail(&b, "general.alignment: expected an integer, found "
	    "string");
}

static void
test_header(void **state)
{
	struct img b = { 0 };

	img_good(&b, 3, 32);
	b.p[0] = 'g';
	img_expect_fail(&b, "not a GGUF file (bad magic)");
	memset(&b, 0, sizeof(b));
	img_good(&b, 1, 32);
	img_expect_fail(&b, "GGUF version 1 is not supported (need 2 or 3)");
	memset(&b, 0, sizeof(b));
	img_good(&b, 4, 32);
	img_expect_fail(&b, "GGUF version 4 is not supported");
	memset(&b, 0, sizeof(b));
	img_good(&b, 0x03000000, 32);
	img_expect_fail(&b, "big-endian GGUF is not supported");
	memset(&b, 0, sizeof(b));
	img_put(&b, "GG", 2);
	img_expect_fail(&b, "truncated at byte 0 reading magic");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 0);
	b.len -= 3;
	img_expect_fail(&b, "truncated at byte 16 reading key/value count");
}

static void
test_empty(void **state)
{
	char err[SOTTO_ERR_MAX] = "";
	struct gguf *g = (struct gguf *)&g;

	assert_int_equal(gguf_open_memory(NULL, 0, &g, err), SOTTO_EFORMAT);
	assert_null(g);
	assert_string_equal(err, "<memory>: empty file");
	assert_int_equal(gguf_open_memory(NULL, 1, &g, err), SOTTO_EINVAL);
	/* A file with no keys and no tensors is valid. */
	assert_int_equal(gguf_open_memory("GGUF\3\0\0\0\0\0\0\0\0\0\0\0\0\0\0"
	    "\0\0\0\0\0", 24, &g, err), 0);
	assert_int_equal(gguf_n_tensors(g), 0);
	assert_null(gguf_find_tensor(g, "x"));
	assert_false(gguf_has_key(g, "x"));
	gguf_close(g);
	gguf_close(NULL);
}

/* Every proper prefix of a good file is an error with a message. */
static void
test_truncated(void **state)
{
	char err[SOTTO_ERR_MAX];
	struct img b = { 0 };
	struct gguf *g;
	size_t len;

	img_good(&b, 3, 32);
	for (len = 0; len < b.len; len++) {
		err[0] = '\0';
		if (img_open(&b, len, &g, err) != SOTTO_EFORMAT)
			fail_msg("prefix of %zu bytes accepted", len);
		assert_true(strlen(err) > 10);
	}
	assert_int_equal(img_open(&b, b.len, &g, err), 0);
	free(b.p);
}

static void
test_huge(void **state)
{
	struct img b = { 0 };

	img_header(&b, 3, 0, UINT64_MAX);
	img_fill(&b, 100);
	img_expect_fail(&b, "header claims 0 tensors and "
	    "18446744073709551615 key/values, more than fit in 124 bytes");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 1ull << 60, 1);
	img_fill(&b, 100);
	img_expect_fail(&b, "more than fit");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 3, 4);	/* 4 * 13 + 3 * 32 > 100 */
	img_fill(&b, 100);
	img_expect_fail(&b, "more than fit");

	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_int(&b, UINT64_MAX, 8);
	img_fill(&b, 20);
	img_expect_fail(&b, "key length 18446744073709551615 at byte 24 runs "
	    "past the end");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_str(&b, "k");
	img_int(&b, GGUF_TYPE_STRING, 4);
	img_int(&b, 1ull << 62, 8);
	img_expect_fail(&b, "string value length 4611686018427387904");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv_arr(&b, "k", GGUF_TYPE_UINT32, 1ull << 62);
	img_fill(&b, 16);
	img_expect_fail(&b, "key k: array of 4611686018427387904 u32 runs "
	    "past the end");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv_arr(&b, "k", GGUF_TYPE_STRING, UINT64_MAX);
	img_str(&b, "a");
	img_expect_fail(&b, "array of 18446744073709551615 string runs");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv_arr(&b, "k", GGUF_TYPE_STRING, 2);
	img_str(&b, "a");
	img_int(&b, 1000, 8);
	img_expect_fail(&b, "array string length 1000");
}

static void
test_dims(void **state)
{
	static const uint64_t ovf[] = { 1ull << 32, 1ull << 32 };
	static const uint64_t ovf2[] = { 1ull << 31, 1ull << 31, 2, 2 };
	static const uint64_t zero[] = { 4, 0 }, neg[] = { 1ull << 63 };
	static const uint64_t five[] = { 1, 1, 1, 1, 1 };
	struct img b = { 0 };

	img_one_tensor(&b, 2, ovf, GGUF_DTYPE_F32, 0, 64);
	img_expect_fail(&b, "tensor t: element count overflows");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 4, ovf2, GGUF_DTYPE_F16, 0, 64);
	img_expect_fail(&b, "tensor t: element count overflows");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 2, zero, GGUF_DTYPE_F32, 0, 64);
	img_expect_fail(&b, "tensor t: dimension 1 is 0");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 1, neg, GGUF_DTYPE_F32, 0, 64);
	img_expect_fail(&b, "tensor t: dimension 0 is 9223372036854775808");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 5, five, GGUF_DTYPE_F32, 0, 64);
	img_expect_fail(&b, "tensor t has 5 dimensions (need 1 to 4)");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 0, five, GGUF_DTYPE_F32, 0, 64);
	img_expect_fail(&b, "tensor t has 0 dimensions");
}

static void
test_offsets(void **state)
{
	static const uint64_t ne[] = { 4 }, ne16[] = { 16 };
	struct img b = { 0 };

	img_one_tensor(&b, 1, ne, GGUF_DTYPE_F32, 4, 64);
	img_expect_fail(&b, "tensor t: data offset 4 is not a multiple of the "
	    "alignment 32");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 1, ne, GGUF_DTYPE_F32, 64, 64);
	img_expect_fail(&b, "tensor t: 16 bytes at data offset 64 run past "
	    "the end of the file (64 bytes of data)");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 1, ne, GGUF_DTYPE_F32, UINT64_MAX - 31, 64);
	img_expect_fail(&b, "run past the end of the file");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 1, ne16, GGUF_DTYPE_F32, 32, 64);
	img_expect_fail(&b, "64 bytes at data offset 32 run past");

	/* Overlap: [0, 64) and [32, 48). */
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 2, 0);
	img_tensor(&b, "b", 1, ne, GGUF_DTYPE_F32, 32);
	img_tensor(&b, "a", 1, ne16, GGUF_DTYPE_F32, 0);
	img_pad(&b, 32);
	img_fill(&b, 64);
	img_expect_fail(&b, "tensors a and b overlap");
	/* Header ends past where data would start. */
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 1, 0);
	img_tensor(&b, "t", 1, ne, GGUF_DTYPE_F32, 0);
	img_expect_fail(&b, "tensor data would start at byte 64 (file is 57 "
	    "bytes)");
}

static void
test_duplicates(void **state)
{
	static const uint64_t ne[] = { 4 };
	struct img b = { 0 };

	img_header(&b, 3, 0, 3);
	img_kv(&b, "a.b", GGUF_TYPE_UINT32, 1);
	img_kv(&b, "a.c", GGUF_TYPE_UINT32, 1);
	img_kv_str(&b, "a.b", "x");
	img_expect_fail(&b, "duplicate key a.b");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 2, 0);
	img_tensor(&b, "w", 1, ne, GGUF_DTYPE_F32, 0);
	img_tensor(&b, "w", 1, ne, GGUF_DTYPE_F32, 32);
	img_pad(&b, 32);
	img_fill(&b, 48);
	img_expect_fail(&b, "duplicate tensor w");
}

static void
test_types(void **state)
{
	static const uint64_t ne[] = { 4 };
	struct img b = { 0 };

	img_header(&b, 3, 0, 1);
	img_kv(&b, "k", GGUF_TYPE_UINT8, 0);
	b.p[b.len - 5] = 13;	/* the type field */
	img_expect_fail(&b, "key k: unknown value type 13");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv_arr(&b, "k", GGUF_TYPE_FLOAT64 + 7, 0);
	img_expect_fail(&b, "key k: unknown value type 19");
	memset(&b, 0, sizeof(b));
	img_one_tensor(&b, 1, ne, 8, 0, 64);
	img_expect_fail(&b, "tensor t has ggml type 8; sotto reads only F32");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv_arr(&b, "outer", GGUF_TYPE_ARRAY, 1);
	img_int(&b, GGUF_TYPE_UINT8, 4);
	img_int(&b, 1, 8);
	img_int(&b, 1, 1);
	img_expect_fail(&b, "key outer: nested arrays are not supported");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 0, 1);
	img_kv(&b, "", GGUF_TYPE_UINT32, 1);
	img_expect_fail(&b, "key at byte 24 has length 0");
	memset(&b, 0, sizeof(b));
	img_header(&b, 3, 1, 0);
	img_tensor(&b, "a.very.long.tensor.name.that.goes.on.and.on.past.the."
	    "64.byte.limit", 1, ne, GGUF_DTYPE_F32, 0);
	img_pad(&b, 32);
	img_fill(&b, 16);
	img_expect_fail(&b, "tensor name of length 66 (need 1 to 64)");
}

/* i32 arrays: element types that fit, values that do not. */
static void
test_int_arrays(void **state)
{
	char err[SOTTO_ERR_MAX] = "";
	struct img b = { 0 };
	struct gguf *g;
	int32_t *ia;
	size_t n;

	img_header(&b, 3, 0, 4);
	img_kv_arr(&b, "i8", GGUF_TYPE_INT8, 2);
	img_int(&b, 0x80, 1);
	img_int(&b, 0x7f, 1);
	img_kv_arr(&b, "u32", GGUF_TYPE_UINT32, 2);
	img_int(&b, 5, 4);
	img_int(&b, 3000000000u, 4);
	img_kv_arr(&b, "i64", GGUF_TYPE_INT64, 1);
	img_int(&b, (uint64_t)-5, 8);
	img_kv_arr(&b, "empty", GGUF_TYPE_INT32, 0);
	assert_int_equal(gguf_open_memory(b.p, b.len, &g, err), 0);
	assert_int_equal(gguf_get_i32_array(g, "i8", &ia, &n, err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(ia[0], -128);
	assert_int_equal(ia[1], 127);
	free(ia);
	assert_int_equal(gguf_get_i32_array(g, "i64", &ia, &n, err), 0);
	assert_int_equal(ia[0], -5);
	free(ia);
	assert_int_equal(gguf_get_i32_array(g, "empty", &ia, &n, err), 0);
	assert_int_equal(n, 0);
	assert_non_null(ia);
	free(ia);
	assert_int_equal(gguf_get_i32_array(g, "u32", &ia, &n, err),
	    SOTTO_EFORMAT);
	assert_string_equal(err, "<memory>: key u32: element 1 (3000000000) "
	    "does not fit in i32");
	gguf_close(g);
	free(b.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_lookup_errors),
		cmocka_unit_test(test_expect_tensor),
		cmocka_unit_test(test_alignment),
		cmocka_unit_test(test_header),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_huge),
		cmocka_unit_test(test_dims),
		cmocka_unit_test(test_offsets),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_types),
		cmocka_unit_test(test_int_arrays),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
