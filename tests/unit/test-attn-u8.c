/*
 * Unit tests for precision int8's encoder attention on AVX2
 * (lib/kernels/attn-u8.c) against the double-precision softmax
 * attention: the window's 1500 positions (not a multiple of 8 or of a
 * block), fewer positions than a block, heads of 64 and 128 channels,
 * keys whose scores are far apart (a peaked softmax) and close (a flat
 * one), and more threads than the blocks need. meson runs it as it is
 * and with ONEDNN_MAX_CPU_ISA=AVX2, so that an AVX-512 machine runs
 * oneDNN's AVX2 GEMM too.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "attn-u8.h"

#include "kernel-data.h"

/*
 * Head h's output at position i in double, into ref[c]: softmax over
 * the keys of q_i . k_j / sqrt(dh), times v.
 */
static void
reference(const float *qkv, int ld, int d, int n_head, int n, int h, int i,
    double *ref)
{
	int dh = d / n_head, j, c;
	double *s = malloc((size_t)n * sizeof(double)), max = -INFINITY;
	double sum = 0.0;

	assert_non_null(s);
	for (j = 0; j < n; j++) {
		double t = 0.0;

		for (c = 0; c < dh; c++)
			t += (double)qkv[((size_t)h * dh + c) * ld + i] *
			    qkv[((size_t)d + h * dh + c) * ld + j];
		s[j] = t / sqrt((double)dh);
		max = fmax(max, s[j]);
	}
	for (j = 0; j < n; j++)
		sum += (s[j] = exp(s[j] - max));
	for (c = 0; c < dh; c++) {
		double o = 0.0;

		for (j = 0; j < n; j++)
			o += s[j] * qkv[((size_t)2 * d + h * dh + c) * ld + j];
		ref[c] = o / sum;
	}
	free(s);
}

/*
 * q and k scaled by spread (a peaked softmax when large), v in [-1, 1];
 * a few positions checked per head against the double reference: the
 * largest error under tol, the rms under tol / 4 (of v's range 1).
 */
static void
check(int d, int n_head, int n, float spread, int threads, double tol)
{
	int ld = n + 13, dh = d / n_head, h, i, c, checked = 0;
	float *qkv = frand_array((size_t)3 * d * ld, 1.0f);
	float *out = calloc((size_t)d * ld, sizeof(float));
	void *scratch = aligned_alloc(64, (attn_u8_bytes(d, n, n_head,
	    threads) + 63) / 64 * 64);
	double ref[128], worst = 0.0, se = 0.0;
	struct attn_u8 a = { .qkv = qkv, .ld = ld, .d = d, .n_head = n_head,
	    .n = n, .out = out, .ldo = ld, .threads = threads };
	char err[256];

	assert_true(out != NULL && scratch != NULL);
	assert_true(attn_u8_fits(d, n_head, n));
	for (i = 0; i < 2 * d * ld; i++)
		qkv[i] *= spread;
	assert_int_equal(attn_u8_run(&a, scratch, err), 0);
	for (h = 0; h < n_head; h++)
		for (i = h % 7; i < n; i += n / 9 + 1) {
			reference(qkv, ld, d, n_head, n, h, i, ref);
			for (c = 0; c < dh; c++) {
				double e = fabs(out[((size_t)h * dh + c) * ld +
				    i] - ref[c]);

				worst = fmax(worst, e);
				se += e * e;
				checked++;
			}
		}
	print_message("d %d, %d heads, n %d, spread %.1f: largest error "
	    "%.2e, rms %.2e\n", d, n_head, n, spread, worst,
	    sqrt(se / checked));
	assert_true(worst < tol);
	assert_true(sqrt(se / checked) < tol / 4);
	free(qkv);
	free(out);
	free(scratch);
}

static void
test_attn_u8(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA): precision int8 is refused, so "
	    "this path never runs");
	check(384, 6, 1500, 1.0f, 2, 0.005);	/* tiny.en's encoder */
	check(256, 2, 1500, 3.0f, 2, 0.06);	/* 128 channels, peaked */
	check(128, 2, 40, 0.3f, 3, 0.01);	/* under a block, flat */
	check(64, 1, 203, 2.0f, 8, 0.03);	/* more threads than blocks */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attn_u8),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
