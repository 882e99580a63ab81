/*
 * layer_attend (attend.c) over keys and values stored as IEEE binary16,
 * for precision int8 on AVX2 (the decoder's cross-attention): a cached
 * step reads every layer's window K and V, 18 MB a token in f32 for
 * tiny.en and 37 MB for base, and is bound by those reads. In f16 they
 * are half the bytes, widened exactly by F16C as they are read. Built
 * for AVX2, FMA and F16C only: that path exists only where the CPU has
 * them (gemv_i8_avx2_supported). The same loops as layer_attend (8 rows
 * of CHUNK keys for all the queries, the weighted sums in 8 lanes of
 * keys), so that a query's floats do not depend on the others.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "layers.h"

#define V3	__attribute__((target("avx2,fma,f16c")))
#define CHUNK	256	/* as attend.c */

V3 static inline __m256
ld8h(const uint16_t *x)
{
	return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x));
}

V3 static inline float
f16_value(uint16_t h)
{
	return _cvtsh_ss(h);
}

/* p[t] += sum over 8 channels c of qs[c] k[c][t], t in [0, n). */
V3 static inline void
scores8(const float *qs, const uint16_t *k, int ldk, int n, float *p)
{
	__m256 q[8], s;
	int t, i;

	for (i = 0; i < 8; i++)
		q[i] = _mm256_set1_ps(qs[i]);
	for (t = 0; t + 8 <= n; t += 8) {
		s = _mm256_loadu_ps(p + t);
		for (i = 0; i < 8; i++)
			s = _mm256_fmadd_ps(q[i], ld8h(k + (size_t)i * ldk +
			    t), s);
		_mm256_storeu_ps(p + t, s);
	}
	for (; t < n; t++)
		for (i = 0; i < 8; i++)
			p[t] = fmaf(qs[i], f16_value(k[(size_t)i * ldk + t]),
			    p[t]);
}

/* sum_t p[t] V[c][t] of 8 channels over [t0, t1) into acc[8] (attend.c) */
V3 static inline void
weighted8(const float *p, const uint16_t *v, int ldk, int t0, int t1,
    __m256 *acc)
{
	__m256 a[8], pt;
	int t, i;

	for (i = 0; i < 8; i++)
		a[i] = acc[i];
	for (t = t0; t < t1; t += 8) {
		pt = _mm256_loadu_ps(p + t);
		for (i = 0; i < 8; i++)
			a[i] = _mm256_fmadd_ps(pt, ld8h(v + (size_t)i * ldk +
			    t), a[i]);
	}
	for (i = 0; i < 8; i++)
		acc[i] = a[i];
}

V3 static inline void
weighted1(const float *p, const uint16_t *v, int t0, int t1, __m256 *acc)
{
	__m256 a = *acc;
	int t;

	for (t = t0; t < t1; t += 8)
		a = _mm256_fmadd_ps(_mm256_loadu_ps(p + t), ld8h(v + t), a);
	*acc = a;
}

V3 static inline float
finish_sum(__m256 acc, const float *p, const uint16_t *v, int n8, int n)
{
	__m128 h = _mm_add_ps(_mm256_castps256_ps128(acc),
	    _mm256_extractf128_ps(acc, 1));
	float s;
	int t;

	h = _mm_add_ps(h, _mm_movehl_ps(h, h));
	h = _mm_add_ss(h, _mm_movehdup_ps(h));
	s = _mm_cvtss_f32(h);
	for (t = n8; t < n; t++)
		s = fmaf(p[t], f16_value(v[t]), s);
	return s;
}

V3 void
layer_attend_f16(const float *q, int ldq, int nq, const uint16_t *k,
    const uint16_t *v, int ldk, int n, int dh, float scale, float *out,
    int ldo, float *p)
{
	__m256 acc[LAYER_ATTEND_MAX_Q][8];
	float qs[8];
	int n8 = n / 8 * 8, c, t, j, i, t0, t1, r, rows;

	memset(p, 0, (size_t)nq * n * sizeof(float));
	for (c = 0; c + 8 <= dh; c += 8)
		for (t0 = 0; t0 < n; t0 += CHUNK) {
			int len = n - t0 < CHUNK ? n - t0 : CHUNK;

			for (j = 0; j < nq; j++) {
				for (i = 0; i < 8; i++)
					qs[i] = q[(size_t)(c + i) * ldq + j] *
					    scale;
				scores8(qs, k + (size_t)c * ldk + t0, ldk, len,
				    p + (size_t)j * n + t0);
			}
		}
	for (; c < dh; c++)
		for (j = 0; j < nq; j++) {
			float qc = q[(size_t)c * ldq + j] * scale;

			for (t = 0; t < n; t++)
				p[(size_t)j * n + t] = fmaf(qc, f16_value(
				    k[(size_t)c * ldk + t]), p[(size_t)j * n +
				    t]);
		}
	for (j = 0; j < nq; j++)
		layer_softmax(p + (size_t)j * n, n);
	for (c = 0; c < dh; c += rows) {
		rows = dh - c >= 8 ? 8 : 1;
		for (j = 0; j < nq; j++)
			for (r = 0; r < 8; r++)
				acc[j][r] = _mm256_setzero_ps();
		for (t0 = 0; t0 < n8; t0 = t1) {
			t1 = n8 - t0 < CHUNK ? n8 : t0 + CHUNK;
			for (j = 0; j < nq; j++)
				if (rows == 8)
					weighted8(p + (size_t)j * n, v +
					    (size_t)c * ldk, ldk, t0, t1,
					    acc[j]);
				else
					weighted1(p + (size_t)j * n, v +
					    (size_t)c * ldk, t0, t1, acc[j]);
		}
		for (r = 0; r < rows; r++)
			for (j = 0; j < nq; j++)
				out[(size_t)(c + r) * ldo + j] = finish_sum(
				    acc[j][r], p + (size_t)j * n, v +
				    (size_t)(c + r) * ldk, n8, n);
	}
}

V3 void
layer_to_f16(const float *x, uint16_t *y, size_t n)
{
	size_t i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(
		    _mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
	for (; i < n; i++)
		y[i] = _cvtss_sh(x[i], _MM_FROUND_TO_NEAREST_INT);
}

V3 void
layer_from_f16(const uint16_t *x, float *y, size_t n)
{
	size_t i;

	for (i = 0; i + 8 <= n; i += 8)
		_mm256_storeu_ps(y + i, ld8h(x + i));
	for (; i < n; i++)
		y[i] = f16_value(x[i]);
}
