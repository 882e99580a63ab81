/*
 * Reproducible test data and double-precision references shared by the
 * kernel tests (test-kernels.c, test-window.c). Include after cmocka.h.
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

static inline double
gelu_ref(double v)
{
	return 0.5 * v * (1.0 + erf(v / sqrt(2.0)));
}

#endif
