/*
 * Reproducible test data and double-precision references shared by the
 * kernel tests (test-kernels.c, test-attend.c, test-window.c,
 * test-gemv-i8-avx2.c).
 * Include after cmocka.h.
 */
#ifndef SOTTO_TEST_KERNEL_DATA_H
#define SOTTO_TEST_KERNEL_DATA_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "gemv.h"

/*
 * Whether sotto runs an ISA's paths here, as lib/gemm.c decides it:
 * oneDNN's effective ISA, the CPU's capped by ONEDNN_MAX_CPU_ISA, so that
 * the suite run with ONEDNN_MAX_CPU_ISA=AVX2 on an AVX-512 machine skips
 * what an AVX2 machine skips (tests/cpu.py says the same to the Python
 * tests). The kernels' own CPUID checks come on top.
 */
static inline int
runs_isa(dnnl_cpu_isa_t isa)
{
	return ((unsigned)dnnl_get_effective_cpu_isa() & (unsigned)isa) ==
	    (unsigned)isa;
}

/* skip() unless have, saying why: what is missing, what covers it. */
#define SKIP_WITHOUT(have, why) do { \
	if (!(have)) { \
		print_message("skipped: %s\n", (why)); \
		skip(); \
	} \
} while (0)

static uint32_t rng = 12345;	/* each test program has its own */

/* Uniform in [-1, 1), reproducible. */
static inline float
frand(void)
{
	rng = rng * 1664525u + 1013904223u;
	return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

static inline uint16_t
to_bf16(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static inline double
bf(float f)
{
	uint32_t u = (uint32_t)to_bf16(f) << 16;
	float r;

	memcpy(&r, &u, sizeof(r));
	return r;
}

static inline float *
frand_array(size_t n, float scale)
{
	float *p = aligned_alloc(64, (n * sizeof(float) + 63) & ~(size_t)63);
	size_t i;

	assert_non_null(p);
	for (i = 0; i < n; i++)
		p[i] = frand() * scale;
	return p;
}

/* Packed bf16 weights from w [rows][k]. */
static inline uint16_t *
pack(const float *w, int rows, int k)
{
	uint16_t *plain = malloc((size_t)rows * k * 2);
	uint16_t *p = aligned_alloc(64, gemv_packed_elems(rows, k) * 2);
	size_t i;

	assert_non_null(plain);
	assert_non_null(p);
	for (i = 0; i < (size_t)rows * k; i++)
		plain[i] = to_bf16(w[i]);
	gemv_pack(plain, rows, k, p);
	free(plain);
	return p;
}

/* sum_kk bf(w[m][kk]) bf(x[kk][j]) in double. */
static inline double
dot_ref(const float *w, int k, int m, const float *x, int ldx, int j)
{
	double s = 0.0;
	int kk;

	for (kk = 0; kk < k; kk++)
		s += bf(w[(size_t)m * k + kk]) * bf(x[(size_t)kk * ldx + j]);
	return s;
}

static inline uint16_t
to_f16(float f)
{
	_Float16 h = (_Float16)f;
	uint16_t u;

	memcpy(&u, &h, sizeof(u));
	return u;
}

/* The f16 value of h. */
static inline double
f16d(uint16_t h)
{
	_Float16 v;

	memcpy(&v, &h, sizeof(v));
	return (double)v;
}

/*
 * The int8 products' data (gemv-i8.c, gemv-i8-avx2.c): F16 weights
 * [rows][k] the caller frees, row 3 ten times larger, and channel 7 of
 * x [k][n] made ten times larger.
 */
static inline uint16_t *
i8_data(int rows, int k, float *x, int n)
{
	uint16_t *w = malloc((size_t)rows * k * 2);
	int m, j, kk;

	assert_non_null(w);
	for (m = 0; m < rows; m++)
		for (kk = 0; kk < k; kk++)
			w[(size_t)m * k + kk] = to_f16(frand() * (m == 3 ? 0.5f :
			    0.05f));
	for (j = 0; j < n; j++)
		x[7 * n + j] *= 10.0f;
	return w;
}

/*
 * An int8 product's y (element [m][j] at m * a->ym + j * a->yj; y0 what
 * it held before) against two references: the weights w as the kernel
 * rounds them (row scale a->scale[m] = max |w| / 127) in double, where
 * only the columns' rounding to qx steps is left (bound: half a step of
 * each column times sum |w|), and the F16 weights themselves (bound:
 * also half a row step times sum |x|).
 */
static inline void
i8_check(const struct gemv_i8_args *a, const uint16_t *w, const float *y0,
    double qx)
{
	const int rows = a->rows, k = a->k, n = a->n;
	const ptrdiff_t ym = a->ym, yj = a->yj;
	const float *x = a->x, *y = a->y;
	int m, j, kk;

	for (m = 0; m < rows; m++)
		for (j = 0; j < n; j++) {
			double max = 0.0, want = 0.0, exact = 0.0, sum_w = 0.0;
			double sum_x = 0.0;
			double old = a->accumulate ? y0[m * ym + j * yj] : 0.0;
			double s = a->scale[m], got = y[m * ym + j * yj] - old;

			for (kk = 0; kk < k; kk++) {
				max = fmax(max, fabs(x[(size_t)kk * n + j]));
				sum_x += fabs(x[(size_t)kk * n + j]);
			}
			for (kk = 0; kk < k; kk++) {
				double wv = f16d(w[(size_t)m * k + kk]);
				double q = s > 0.0 ? rint((float)wv *
				    (127.0f / (float)(s * 127.0))) : 0.0;

				want += q * s * x[(size_t)kk * n + j];
				exact += wv * x[(size_t)kk * n + j];
				sum_w += fabs(q * s);
			}
			assert_float_equal(got, want, sum_w * max / qx +
			    1e-5 * (1.0 + fabs(want)));
			/* and each weight within half a step of its own */
			assert_float_equal(got, exact, 0.5 * s * sum_x +
			    sum_w * max / qx + 1e-5 * (1.0 + fabs(want)));
		}
}

static inline double
gelu_ref(double v)
{
	return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
}

/*
 * s[0..n) replaced by exp(s - max), in double; returns their sum: the
 * reference softmax of the attention tests is s[t] / the sum.
 */
static inline double
softmax_ref(double *s, int n)
{
	double max = -INFINITY, sum = 0.0;
	int t;

	for (t = 0; t < n; t++)
		max = s[t] > max ? s[t] : max;
	for (t = 0; t < n; t++)
		sum += (s[t] = exp(s[t] - max));
	return sum;
}

#endif
