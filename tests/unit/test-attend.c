/*
 * Unit tests for layer_attend (lib/kernels/attend.c), the fp32 path's
 * cross-attention of a cached step, and layer_attend_f16 (attend-f16.c:
 * the same over binary16 K and V, precision int8 on AVX2): nq queries
 * (beams) against the window's keys and values, channels-first. Against softmax(scale q.K) V
 * in double, over shapes that hit its edges (a whole window's keys and
 * fewer than a vector's, more queries than a beam search has, a head
 * width that is not a multiple of 4), and each query alone against the
 * same query among others: a beam's attention must be the very same
 * floats whatever is beside it, so that batching beams (or streams
 * stepped together) changes no word.
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
#include "layers.h"

#include "kernel-data.h"

#define LDK_PAD	4	/* keys' row stride beyond n, as the window's 1504 */

/* out[c][j] against the double reference for query j. */
static void
check_ref(const float *q, int ldq, int j, const float *k, const float *v,
    int ldk, int n, int dh, float scale, const float *out, int ldo)
{
	double *s = malloc((size_t)n * sizeof(double)), sum;
	int c, t;

	assert_non_null(s);
	for (t = 0; t < n; t++) {
		s[t] = 0.0;
		for (c = 0; c < dh; c++)
			s[t] += (double)q[(size_t)c * ldq + j] *
			    k[(size_t)c * ldk + t];
		s[t] *= scale;
	}
	sum = softmax_ref(s, n);
	for (c = 0; c < dh; c++) {
		double want = 0.0;

		for (t = 0; t < n; t++)
			want += s[t] / sum * v[(size_t)c * ldk + t];
		assert_float_equal(out[(size_t)c * ldo + j], want, 1e-5);
	}
	free(s);
}

static void
check_attend(int nq, int n, int dh)
{
	int ldk = n + LDK_PAD, ldq = nq + 1, ldo = nq + 2, j, c;
	float *q = frand_array((size_t)dh * ldq, 1.0f);
	float *k = frand_array((size_t)dh * ldk, 2.0f);
	float *v = frand_array((size_t)dh * ldk, 1.0f);
	float *out = frand_array((size_t)dh * ldo, 1.0f);
	float *one = frand_array((size_t)dh, 1.0f);
	float *p = malloc((size_t)nq * n * sizeof(float));
	float scale = 1.0f / sqrtf((float)dh);

	assert_non_null(p);
	layer_attend(q, ldq, nq, k, v, ldk, n, dh, scale, out, ldo, p);
	for (j = 0; j < nq; j++) {
		check_ref(q, ldq, j, k, v, ldk, n, dh, scale, out, ldo);
		layer_attend(q + j, ldq, 1, k, v, ldk, n, dh, scale, one, 1,
		    p);
		for (c = 0; c < dh; c++)
			assert_memory_equal(&one[c], &out[(size_t)c * ldo +
			    j], sizeof(float));
	}
	free(q);
	free(k);
	free(v);
	free(out);
	free(one);
	free(p);
}

/*
 * layer_attend_f16 (precision int8 on AVX2): K and V rounded to binary16,
 * against the double reference on the rounded values (the kernel widens
 * them exactly), and each query alone against the batch, bit for bit.
 */
static void
check_attend_f16(int nq, int n, int dh)
{
	int ldk = n + LDK_PAD, ldq = nq + 1, ldo = nq + 2, j, c;
	size_t kn = (size_t)dh * ldk;
	float *q = frand_array((size_t)dh * ldq, 1.0f);
	float *k = frand_array(kn, 2.0f), *v = frand_array(kn, 1.0f);
	float *out = frand_array((size_t)dh * ldo, 1.0f);
	float *one = frand_array((size_t)dh, 1.0f);
	float *p = malloc((size_t)nq * n * sizeof(float));
	uint16_t *k16 = malloc(kn * 2), *v16 = malloc(kn * 2);
	float scale = 1.0f / sqrtf((float)dh);

	assert_non_null(p);
	assert_non_null(k16);
	assert_non_null(v16);
	layer_to_f16(k, k16, kn);
	layer_to_f16(v, v16, kn);
	layer_from_f16(k16, k, kn);
	layer_from_f16(v16, v, kn);
	layer_attend_f16(q, ldq, nq, k16, v16, ldk, n, dh, scale, out, ldo,
	    p);
	for (j = 0; j < nq; j++) {
		check_ref(q, ldq, j, k, v, ldk, n, dh, scale, out, ldo);
		layer_attend_f16(q + j, ldq, 1, k16, v16, ldk, n, dh, scale,
		    one, 1, p);
		for (c = 0; c < dh; c++)
			assert_memory_equal(&one[c], &out[(size_t)c * ldo +
			    j], sizeof(float));
	}
	free(q);
	free(k);
	free(v);
	free(out);
	free(one);
	free(p);
	free(k16);
	free(v16);
}

static void
test_attend_f16(void **state)
{
	(void)state;
	SKIP_WITHOUT(gemv_i8_avx2_supported(), "no AVX2, FMA and F16C here "
	    "(or ONEDNN_MAX_CPU_ISA below avx2): test_attend_window checks "
	    "the f32 form");
	check_attend_f16(1, 1500, 64);
	check_attend_f16(5, 1500, 64);
	check_attend_f16(5, 301, 64);
	check_attend_f16(7, 100, 64);
	check_attend_f16(6, 1500, 64);
	check_attend_f16(2, 40, 6);
	check_attend_f16(4, 9, 8);
}

static void
test_attend_window(void **state)
{
	(void)state;
	check_attend(1, 1500, 64);	/* greedy over a whole window */
	check_attend(5, 1500, 64);	/* 5 beams */
	check_attend(3, 1500, 64);
	check_attend(5, 301, 64);	/* keys not whole vectors */
	check_attend(7, 100, 64);	/* more queries than 5 beams */
	check_attend(11, 300, 64);	/* groups of 5, 5 and 1 */
	check_attend(16, 64, 64);	/* LAYER_ATTEND_MAX_Q */
	check_attend(2, 40, 6);		/* a head width not a multiple of 4 */
	check_attend(4, 9, 8);		/* fewer keys than a vector */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attend_window),
		cmocka_unit_test(test_attend_f16),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
