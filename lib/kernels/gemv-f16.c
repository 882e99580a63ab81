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

#include "gemm.h"
#include "gemv.h"

#define V4	__attribute__((target("avx512f,avx512bw,avx512vl,f16c,fma")))
#define V3	__attribute__((target("avx2,f16c,fma")))
#define PAR_MIN_ELEMS	(1u << 16)	/* as gemv.c */
#define V4_COLS		5	/* columns per pass over a row: 10 sums */
#define V3_COLS		3	/* 12 sums of the 16 registers */

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

/*
 * dot_v4 of one row against nc (a constant) columns xt[j][k] into
 * out[j]: each F16 value converted once for all of them (the conversions
 * took as long as the products when each column converted the row
 * again), every column's sum made as dot_v4 makes it (the same floats).
 */
V4 static inline __attribute__((always_inline)) void
dots_v4(const uint16_t *w, const float *xt, int k, const int nc, float *out)
{
	__m512 a0[V4_COLS], a1[V4_COLS];
	int i, j;

	for (j = 0; j < nc; j++)
		a0[j] = a1[j] = _mm512_setzero_ps();
	for (i = 0; i < k; i += 32) {
		__m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(w + i)));
		__m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(w + i + 16)));

		for (j = 0; j < nc; j++) {
			const float *x = xt + (size_t)j * k;

			a0[j] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + i),
			    a0[j]);
			a1[j] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + i +
			    16), a1[j]);
		}
	}
	for (j = 0; j < nc; j++)
		out[j] = _mm512_reduce_add_ps(_mm512_add_ps(a0[j], a1[j]));
}

V4 static void
dots_v4_n(const uint16_t *w, const float *xt, int k, int nc, float *out)
{
	switch (nc) {
	case 2: dots_v4(w, xt, k, 2, out); break;
	case 3: dots_v4(w, xt, k, 3, out); break;
	case 4: dots_v4(w, xt, k, 4, out); break;
	default: dots_v4(w, xt, k, 5, out);
	}
}

/* The sum of a's lanes, in gemv_dot_f16_avx2's order. */
V3 static inline float
hsum_v3(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
	__m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2,
	    a3));
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(s),
	    _mm256_extractf128_ps(s, 1));

	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	return _mm_cvtss_f32(h);
}

/* As dots_v4, by AVX2: gemv_dot_f16_avx2's sums, for nc columns. */
V3 static inline __attribute__((always_inline)) void
dots_v3(const uint16_t *w, const float *xt, int k, const int nc, float *out)
{
	__m256 a[V3_COLS][4];
	int i, j, q;

	for (j = 0; j < nc; j++)
		for (q = 0; q < 4; q++)
			a[j][q] = _mm256_setzero_ps();
	for (i = 0; i < k; i += 32)
		for (q = 0; q < 4; q++) {
			__m256 wq = _mm256_cvtph_ps(_mm_loadu_si128(
			    (const __m128i *)(w + i + 8 * q)));

			for (j = 0; j < nc; j++)
				a[j][q] = _mm256_fmadd_ps(wq, _mm256_loadu_ps(
				    xt + (size_t)j * k + i + 8 * q), a[j][q]);
		}
	for (j = 0; j < nc; j++)
		out[j] = hsum_v3(a[j][0], a[j][1], a[j][2], a[j][3]);
}

V3 static void
dots_v3_n(const uint16_t *w, const float *xt, int k, int nc, float *out)
{
	switch (nc) {
	case 2: dots_v3(w, xt, k, 2, out); break;
	default: dots_v3(w, xt, k, 3, out);
	}
}

/*
 * dots_v3 of two rows against nc (2 to 5, a constant) columns: each of
 * a column's four sums (the values of k at 8 q .. 8 q + 7 of every 32)
 * in a pass of its own over both rows, 10 sums in registers, so that
 * each 8 of a column is loaded once for both rows and each 8 of a row
 * widened once for all the columns. Passes of 3 and 2 columns over one
 * row loaded a column's values for every product and were bound by those
 * loads (5 beams' fc2 of base, 512 x 2048: 0.185 ms on two cores).
 * Each sum adds the same products in the same order as dots_v3's.
 */
V3 static inline __attribute__((always_inline)) void
dots_v3_rows2(const uint16_t *w0, const uint16_t *w1, const float *xt, int k,
    const int nc, float *out0, float *out1)
{
	__m256 a[2][5][4], s0[5], s1[5], x;
	int i, j, q;

	for (q = 0; q < 4; q++) {
		for (j = 0; j < nc; j++)
			s0[j] = s1[j] = _mm256_setzero_ps();
		for (i = 8 * q; i < k; i += 32) {
			__m256 v0 = _mm256_cvtph_ps(_mm_loadu_si128(
			    (const __m128i *)(w0 + i)));
			__m256 v1 = _mm256_cvtph_ps(_mm_loadu_si128(
			    (const __m128i *)(w1 + i)));

			for (j = 0; j < nc; j++) {
				x = _mm256_loadu_ps(xt + (size_t)j * k + i);
				s0[j] = _mm256_fmadd_ps(v0, x, s0[j]);
				s1[j] = _mm256_fmadd_ps(v1, x, s1[j]);
			}
		}
		for (j = 0; j < nc; j++) {
			a[0][j][q] = s0[j];
			a[1][j][q] = s1[j];
		}
	}
	for (j = 0; j < nc; j++) {
		out0[j] = hsum_v3(a[0][j][0], a[0][j][1], a[0][j][2],
		    a[0][j][3]);
		out1[j] = hsum_v3(a[1][j][0], a[1][j][1], a[1][j][2],
		    a[1][j][3]);
	}
}

V3 static void
dots_v3_rows2_n(const uint16_t *w0, const uint16_t *w1, const float *xt,
    int k, int nc, float *out0, float *out1)
{
	switch (nc) {
	case 2: dots_v3_rows2(w0, w1, xt, k, 2, out0, out1); break;
	case 3: dots_v3_rows2(w0, w1, xt, k, 3, out0, out1); break;
	case 4: dots_v3_rows2(w0, w1, xt, k, 4, out0, out1); break;
	default: dots_v3_rows2(w0, w1, xt, k, 5, out0, out1);
	}
}

V3 float
gemv_dot_f16_avx2(const uint16_t *w, const float *x, int k)
{
	__m256 a[4];
	int i, j;

	for (j = 0; j < 4; j++)
		a[j] = _mm256_setzero_ps();
	for (i = 0; i < k; i += 32)
		for (j = 0; j < 4; j++)
			a[j] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(
			    (const __m128i *)(w + i + 8 * j))),
			    _mm256_loadu_ps(x + i + 8 * j), a[j]);
	return hsum_v3(a[0], a[1], a[2], a[3]);
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
	unsigned isa = gemm_cpu_isa();

	if (k % 32 == 0 && (isa & dnnl_cpu_isa_avx512_core) ==
	    dnnl_cpu_isa_avx512_core)
		return dot_v4;
	if (k % 32 == 0 && (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 &&
	    __builtin_cpu_supports("f16c") && __builtin_cpu_supports("fma"))
		return gemv_dot_f16_avx2;
	return dot_scalar;
}

typedef void (*dots_fn)(const uint16_t *, const float *, int, int, float *);

/* Column j's value v of row m into y. */
static inline void
put(const struct gemv_args *a, float *y, int m, int j, float v)
{
	float *o = y + m * a->ym + j * a->yj;

	*o = a->accumulate ? *o + v : v;
}

/* Rows [m0, m1) against the n columns xt[j][k], up to cols at a time. */
static void
rows_f16(const struct gemv_args *a, const float *xt, int n, float *y,
    int m0, int m1, dot_fn dot)
{
	dots_fn dots = dot == dot_v4 ? dots_v4_n : dot == gemv_dot_f16_avx2 ?
	    dots_v3_n : NULL;
	int cols = dot == dot_v4 ? V4_COLS : V3_COLS, m, j, j0, nc;
	float v[V4_COLS], v1[V4_COLS];

	/* 2-5 columns (beams) on AVX2: two rows at a time */
	if (dot == gemv_dot_f16_avx2 && n >= 2 && n <= 5)
		for (; m0 + 1 < m1; m0 += 2) {
			const uint16_t *w = a->wp + (size_t)m0 * a->k;

			dots_v3_rows2_n(w, w + a->k, xt, a->k, n, v, v1);
			for (j = 0; j < n; j++) {
				put(a, y, m0, j, v[j]);
				put(a, y, m0 + 1, j, v1[j]);
			}
		}
	for (m = m0; m < m1; m++) {
		const uint16_t *w = a->wp + (size_t)m * a->k;

		/* a row is 0.75-4 KB: read once, in L1 for the others */
		for (j0 = 0; j0 < n; j0 += nc) {
			nc = dots == NULL ? 1 : n - j0 < cols ? n - j0 : cols;
			/* one column (greedy) as before: dot, the same sum */
			if (nc > 1)
				dots(w, xt + (size_t)j0 * a->k, a->k, nc, v);
			else
				v[0] = dot(w, xt + (size_t)j0 * a->k, a->k);
			for (j = 0; j < nc; j++)
				put(a, y, m, j0 + j, v[j]);
		}
	}
}

void
gemv_f16(const struct gemv_args *a, float *scratch)
{
	int par = (size_t)a->rows * a->k >= PAR_MIN_ELEMS, j0, nb;
	dot_fn dot = dot_pick(a->k);

	for (j0 = 0; j0 < a->n; j0 += GEMV_F16_COLS) {
		nb = a->n - j0 < GEMV_F16_COLS ? a->n - j0 : GEMV_F16_COLS;
		/* the columns laid out inside the region, shared among the
		 * threads (gemv_i8_avx2 says why) */
#pragma omp parallel if (par)
		{
			int t = omp_get_thread_num(), nt = omp_get_num_threads();
			int j, kk;

			for (j = t; j < nb; j += nt)
				for (kk = 0; kk < a->k; kk++)
					scratch[(size_t)j * a->k + kk] =
					    a->x[(size_t)kk * a->ldx + j0 + j];
#pragma omp barrier
			rows_f16(a, scratch, nb, a->y + j0 * a->yj,
			    (int)((long long)a->rows * t / nt),
			    (int)((long long)a->rows * (t + 1) / nt), dot);
		}
	}
}
