/*
 * Unit tests for precision int8's AVX2 decoder products
 * (lib/kernels/gemv-i8-avx2.c) against double-precision references, over
 * shapes that hit its edges: rows that are not whole blocks of 32 (the
 * output head's vocabulary), every column-count instance (1-5, 8) and
 * more than one pass of 8 (a prompt), accumulation, the logits layout,
 * widths whose column scale is below 32767, and products split among
 * the threads; and the output head's rescoring. meson runs it as it is and with ONEDNN_MAX_CPU_ISA=AVX2
 * (the path an AVX2-only CPU takes); the kernel needs AVX2, FMA and
 * F16C, so with the ISA capped below AVX2 the cases are skipped.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "gemv.h"

#include "kernel-data.h"

/* The largest |q| the kernel gives a column of k (its col_qmax). */
static double
col_qmax(int k)
{
	double q = floor(2147483647.0 / (127.0 * (k / 2)));

	return q > 32767.0 ? 32767.0 : q;
}

/*
 * gemv_i8_avx2 against i8_check's references, the columns rounded to
 * col_qmax(k) steps; the last rows are padding the kernel must not write.
 */
static void
check(int rows, int k, int n, int accumulate, int logits_layout)
{
	int padded = gemv_i8_avx2_rows(rows);
	float *x = frand_array((size_t)k * n, 1.0f);
	/* one guard row past the end in either layout */
	float *y = frand_array((size_t)(rows + 1) * n, 1.0f);
	float *y0 = malloc((size_t)(rows + 1) * n * sizeof(float));
	uint8_t *wp = aligned_alloc(64, gemv_i8_avx2_bytes(rows, k));
	float *scale = calloc((size_t)padded, sizeof(float));
	void *scratch = aligned_alloc(64, GEMV_I8_AVX2_SCRATCH_BYTES(k));
	uint16_t *w = i8_data(rows, k, x, n);
	struct gemv_i8_args a = { .wp = wp, .scale = scale, .rows = rows,
	    .k = k, .x = x, .ldx = n, .n = n, .y = y,
	    .ym = logits_layout ? 1 : n, .yj = logits_layout ? rows : 1,
	    .accumulate = accumulate };
	int j;

	assert_true(y0 != NULL && wp != NULL && scale != NULL &&
	    scratch != NULL);
	memcpy(y0, y, (size_t)(rows + 1) * n * sizeof(float));
	memset(wp, 0, gemv_i8_avx2_bytes(rows, k));
	/* in two calls, as a stacked q; k; v is packed */
	gemv_i8_avx2_pack(w, rows / 2, k, 0, wp, scale);
	gemv_i8_avx2_pack(w + (size_t)(rows / 2) * k, rows - rows / 2, k,
	    rows / 2, wp, scale);
	gemv_i8_avx2(&a, scratch);
	i8_check(&a, w, y0, col_qmax(k));
	/* nothing written past the real rows */
	for (j = 0; j < n; j++)
		assert_true(logits_layout ? y[(size_t)n * rows + j] ==
		    y0[(size_t)n * rows + j] : y[(size_t)rows * n + j] ==
		    y0[(size_t)rows * n + j]);
	free(w);
	free(x);
	free(y);
	free(y0);
	free(wp);
	free(scale);
	free(scratch);
}

static void
test_gemv_i8_avx2(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA): precision int8 is refused; "
	    "test-kernels checks the fp32 products");
	check(64, 64, 1, 0, 0);
	check(100, 128, 2, 1, 0);	/* rows not whole blocks */
	check(64, 192, 3, 0, 1);
	check(37, 64, 4, 1, 1);
	check(64, 128, 5, 0, 0);
	check(96, 64, 7, 1, 0);		/* the 8-column instance */
	check(70, 64, 11, 0, 1);	/* two passes */
	check(40, 1536, 1, 0, 0);	/* a column scale below 32767 */
	check(32, 2048, 5, 1, 0);
	check(300, 320, 1, 1, 1);	/* shared among the threads */
	check(1000, 64, 5, 0, 1);
}

/*
 * An output head (logits layout, 1000 rows, n columns shared among the
 * threads): after gemv_i8_avx2_rescore the GEMV_I8_AVX2_EXACT largest of
 * each column are the F16 rows' own products in f32 (to 1e-4), so each
 * column's largest is the exact largest; the rest stay the int8
 * products.
 */
static void
test_gemv_i8_avx2_rescore_run(int n)
{
	const int rows = 1000, k = 128;
	uint16_t *w = malloc((size_t)rows * k * 2);
	float *x = frand_array((size_t)k * n, 1.0f);
	float *y = malloc((size_t)rows * n * sizeof(float));
	float *y8 = malloc((size_t)rows * n * sizeof(float));
	uint8_t *wp = aligned_alloc(64, gemv_i8_avx2_bytes(rows, k));
	float *scale = calloc((size_t)gemv_i8_avx2_rows(rows), sizeof(float));
	size_t need = GEMV_I8_AVX2_RESCORE_BYTES(k, n);
	void *scratch = aligned_alloc(64, need > GEMV_I8_AVX2_SCRATCH_BYTES(k) ?
	    need : GEMV_I8_AVX2_SCRATCH_BYTES(k));
	struct gemv_i8_args a = { 0 };
	int m, j, kk, changed;

	assert_true(w != NULL && y != NULL && y8 != NULL && wp != NULL &&
	    scale != NULL && scratch != NULL);
	for (m = 0; m < rows * k; m++)
		w[m] = to_f16(frand() * 0.05f);
	memset(wp, 0, gemv_i8_avx2_bytes(rows, k));
	gemv_i8_avx2_pack(w, rows, k, 0, wp, scale);
	a = (struct gemv_i8_args){ .wp = wp, .scale = scale, .rows = rows,
	    .k = k, .x = x, .ldx = n, .n = n, .y = y, .ym = 1, .yj = rows };
	gemv_i8_avx2(&a, scratch);
	memcpy(y8, y, (size_t)rows * n * sizeof(float));
	gemv_i8_avx2_rescore(w, rows, k, x, n, n, y, rows, scratch);
	for (j = 0; j < n; j++) {
		double best = -1e30, got_best = -1e30;

		changed = 0;
		for (m = 0; m < rows; m++) {
			double exact = 0.0;

			for (kk = 0; kk < k; kk++)
				exact += f16d(w[(size_t)m * k + kk]) *
				    x[(size_t)kk * n + j];
			best = fmax(best, exact);
			got_best = fmax(got_best, y[(size_t)j * rows + m]);
			if (y[(size_t)j * rows + m] != y8[(size_t)j * rows +
			    m]) {
				assert_float_equal(y[(size_t)j * rows + m],
				    exact, 1e-4);
				changed++;
			}
		}
		assert_true(changed <= GEMV_I8_AVX2_EXACT);
		assert_true(changed >= GEMV_I8_AVX2_EXACT / 2);
		assert_float_equal(got_best, best, 1e-4);
	}
	free(w);
	free(x);
	free(y);
	free(y8);
	free(wp);
	free(scale);
	free(scratch);
}

/* Skipped before anything is allocated (LeakSanitizer). */
static void
test_gemv_i8_avx2_rescore(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA)");
	test_gemv_i8_avx2_rescore_run(5);	/* 5 beams */
	test_gemv_i8_avx2_rescore_run(16);	/* 16 streams stepped together */
}

/* An all-zero row (scale 0) and column give zeros, not NaN. */
static void
test_gemv_i8_avx2_zeros_run(void)
{
	uint16_t w[64 * 64] = { 0 };
	float x[64] = { 0 }, y[64], scale[64];
	uint8_t *wp = aligned_alloc(64, gemv_i8_avx2_bytes(64, 64));
	void *scratch = aligned_alloc(64, GEMV_I8_AVX2_SCRATCH_BYTES(64));
	struct gemv_i8_args a = { 0 };
	int m;

	assert_true(wp != NULL && scratch != NULL);
	for (m = 0; m < 64; m++)
		w[m * 64 + m] = m == 5 ? 0 : to_f16(1.0f);
	x[9] = 2.0f;
	gemv_i8_avx2_pack(w, 64, 64, 0, wp, scale);
	a = (struct gemv_i8_args){ .wp = wp, .scale = scale, .rows = 64,
	    .k = 64, .x = x, .ldx = 1, .n = 1, .y = y, .ym = 1, .yj = 64 };
	gemv_i8_avx2(&a, scratch);
	for (m = 0; m < 64; m++)
		assert_float_equal(y[m], m == 9 ? 2.0 : 0.0, 1e-3);
	memset(x, 0, sizeof(x));
	gemv_i8_avx2(&a, scratch);
	for (m = 0; m < 64; m++)
		assert_true(y[m] == 0.0f);
	free(wp);
	free(scratch);
}

/* Skipped before anything is allocated (LeakSanitizer). */
static void
test_gemv_i8_avx2_zeros(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA)");
	test_gemv_i8_avx2_zeros_run();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_gemv_i8_avx2),
		cmocka_unit_test(test_gemv_i8_avx2_zeros),
		cmocka_unit_test(test_gemv_i8_avx2_rescore),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
