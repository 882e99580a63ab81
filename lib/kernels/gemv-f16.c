/*
 * The fp32 path's decoder products with few columns (a cached step: one
 * per beam; an output head's chosen rows), from the model's F16 weights.
 *
 * Why: F16 -> f32 is exact, so a product of the F16 weights converted as
 * they are read is the f32 product (up to summation order), at half the
 * bytes: a step of the fp32 path is bound by reading its weights, and
 * dnnl_sgemm read the f32 copies (tiny.en: 33 MB of layers and an 80 MB
 * head a token). For AVX-512 and for AVX2 with F16C (which convert 16
 * or 8 at a time), and plain x86-64, picked at run time.
 */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "gemv.h"

#define V4	__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))
#define V3	__attribute__((target("avx2,f16c,fma")))
#define PAR_MIN_ELEMS	(1u << 16)	/* as gemv.c */

/*
 * sum_i w[i] x[i] with w F16, k a multiple of 32 (Whisper's widths) for
 * the vector forms. GCC does not vectorise F16 conversions on its own.
 */
V4 static float
dot_v4(const uint16_t *w, const float *x, int k)
{
	__m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
	int i;

	for (i = 0; i < k; i += 32) {
		a0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(w + i))), _mm512_loadu_ps(x + i), a0);
		a1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(w + i + 16))), _mm512_loadu_ps(x + i +
		    16), a1);
	}
	return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}

V3 float
gemv_dot_f16_avx2(const uint16_t *w, const float *x, int k)
{
	__m256 a[4], s;
	__m128 h;
	int i, j;

	for (j = 0; j < 4; j++)
		a[j] = _mm256_setzero_ps();
	for (i = 0; i < k; i += 32)
		for (j = 0; j < 4; j++)
			a[j] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(
			    (const __m128i *)(w + i + 8 * j))),
			    _mm256_loadu_ps(x + i + 8 * j), a[j]);
	s = _mm256_add_ps(_mm256_add_ps(a[0], a[1]), _mm256_add_ps(a[2],
	    a[3]));
	h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

static float
dot_scalar(const uint16_t *w, const float *x, int k)
{
	float s = 0.0f;
	int i;

	for (i = 0; i < k; i++) {
		_Float16 h;

		memcpy(&h, w + i, 2);
		s += (float)h * x[i];
	}
	return s;
}

typedef float (*dot_fn)(const uint16_t *, const float *, int);

/*
 * The widest form the CPU has, capped as oneDNN's is by
 * ONEDNN_MAX_CPU_ISA, so that the AVX2 and plain paths can be forced
 * (tests/e2e: test_forced_isa).
 */
static dot_fn
dot_pick(int k)
{
	dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();

	if (k % 32 == 0 && (isa & dnnl_cpu_isa_avx512_core) ==
	    dnnl_cpu_isa_avx512_core)
		return dot_v4;
	if (k % 32 == 0 && (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 &&
	    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma"))
		return gemv_dot_f16_avx2;
	return dot_scalar;
}

/* Rows [m0, m1) against the n columns xt[j][k]. */
static void
rows_f16(const struct gemv_args *a, const float *xt, int n, float *y,
    int m0, int m1, dot_fn dot)
{
	int m, j;

	for (m = m0; m < m1; m++) {
		const uint16_t *w = a->wp + (size_t)m * a->k;

		/* a row is 0.75-4 KB: read once, in L1 for the others */
		for (j = 0; j < n; j++) {
			float v = dot(w, xt + (size_t)j * a->k, a->k);
			float *o = y + m * a->ym + j * a->yj;

			*o = a->accumulate ? *o + v : v;
		}
	}
}

void
gemv_f16(const struct gemv_args *a, float *scratch)
{
	int par = (size_t)a->rows * a->k >= PAR_MIN_ELEMS, j0, nb, j, kk;
	dot_fn dot = dot_pick(a->k);

	for (j0 = 0; j0 < a->n; j0 += GEMV_F16_COLS) {
		nb = a->n - j0 < GEMV_F16_COLS ? a->n - j0 : GEMV_F16_COLS;
		for (j = 0; j < nb; j++)
			for (kk = 0; kk < a->k; kk++)
				scratch[(size_t)j * a->k + kk] =
				    a->x[(size_t)kk * a->ldx + j0 + j];
#pragma omp parallel if (par)
		{
			int t = omp_get_thread_num(), nt = omp_get_num_threads();

			rows_f16(a, scratch, nb, a->y + j0 * a->yj,
			    (int)((long long)a->rows * t / nt),
			    (int)((long long)a->rows * (t + 1) / nt), dot);
		}
	}
}
