/*
 * Attention of a few decoder queries: over the window's keys and values
 * (the cross-attention of a cached step, channels-first) and over the
 * self-attention caches (token-major). Built, like layers.c, by
 * target_clones for AVX-512 and AVX2.
 */
#include <stdint.h>
#include <string.h>

#include "amx.h"
#include "layers.h"

#define CLONES	__attribute__((target_clones("arch=x86-64-v4", \
	"arch=x86-64-v3", "default")))

/*
 * The scores of one query: p[t] += sum over 8 channels c of q[c] k[c][t],
 * added channel by channel in order, as a loop over one channel at a
 * time adds them (the same floats), with p loaded and stored once per 8
 * channels instead of once per channel: the one-channel loop was bound
 * by those stores.
 */
static inline void
scores8(const float *qs, const float *k, int ldk, int n, float *p)
{
	const float *k0 = k, *k1 = k0 + ldk, *k2 = k1 + ldk, *k3 = k2 + ldk;
	const float *k4 = k3 + ldk, *k5 = k4 + ldk, *k6 = k5 + ldk;
	const float *k7 = k6 + ldk;
	int t;

#pragma omp simd
	for (t = 0; t < n; t++) {
		float s = p[t] + qs[0] * k0[t];

		s = s + qs[1] * k1[t];
		s = s + qs[2] * k2[t];
		s = s + qs[3] * k3[t];
		s = s + qs[4] * k4[t];
		s = s + qs[5] * k5[t];
		s = s + qs[6] * k6[t];
		p[t] = s + qs[7] * k7[t];
	}
}

/*
 * sum_t p[t] V[c][t] of 8 channels (rows ldk apart) into out[0, ldo, ...
 * 7 ldo]: eight sums in flight, each reduced as the one-channel loop
 * reduces it (GCC keeps a reduction's lanes and their final order per
 * variable: the same floats on x86-64, -v3 and -v4). One sum at a time
 * waited on its own additions: 5 beams' cross-attention over a window
 * (24 heads of tiny.en, 1500 keys) took 1.73 ms this way against 2.05
 * (AVX-512, 1 thread, least of 30), and eight against four took 1.87
 * against 2.44 (with scores8; AVX2, Zen 3). Tiling the scores instead
 * (16 keys of every channel in registers) made them slower: 64 rows 6
 * KB apart per tile.
 */
static inline void
weighted8(const float *p, const float *v, int ldk, int n, float *out,
    int ldo)
{
	const float *v0 = v, *v1 = v0 + ldk, *v2 = v1 + ldk, *v3 = v2 + ldk;
	const float *v4 = v3 + ldk, *v5 = v4 + ldk, *v6 = v5 + ldk;
	const float *v7 = v6 + ldk;
	float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
	float a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
	int t;

#pragma omp simd reduction(+:a0, a1, a2, a3, a4, a5, a6, a7)
	for (t = 0; t < n; t++) {
		a0 += p[t] * v0[t];
		a1 += p[t] * v1[t];
		a2 += p[t] * v2[t];
		a3 += p[t] * v3[t];
		a4 += p[t] * v4[t];
		a5 += p[t] * v5[t];
		a6 += p[t] * v6[t];
		a7 += p[t] * v7[t];
	}
	out[0] = a0;
	out[ldo] = a1;
	out[2 * (size_t)ldo] = a2;
	out[3 * (size_t)ldo] = a3;
	out[4 * (size_t)ldo] = a4;
	out[5 * (size_t)ldo] = a5;
	out[6 * (size_t)ldo] = a6;
	out[7 * (size_t)ldo] = a7;
}

/*
 * nq queries (consecutive columns of q, channel stride ldq) against the
 * same n keys of one head, channels-first: p = softmax(scale q.K),
 * out[c * ldo + j] = sum_t p[j][t] V[c][t]. K and V are [dh][ldk] and are
 * read once for all queries (they do not fit in cache for long windows):
 * 8 rows at a time, which stay in L1 while each query takes its turn.
 * p is nq * n floats of scratch.
 */
CLONES void
layer_attend(const float *q, int ldq, int nq, const float *k, const float *v,
    int ldk, int n, int dh, float scale, float *out, int ldo, float *p)
{
	float qs[8];
	int c, t, j, i;

	for (t = 0; t < nq * n; t++)
		p[t] = 0.0f;
	for (c = 0; c + 8 <= dh; c += 8)
		for (j = 0; j < nq; j++) {
			for (i = 0; i < 8; i++)
				qs[i] = q[(size_t)(c + i) * ldq + j] * scale;
			scores8(qs, k + (size_t)c * ldk, ldk, n, p +
			    (size_t)j * n);
		}
	for (; c < dh; c++) {
		const float *kr = k + (size_t)c * ldk;

		for (j = 0; j < nq; j++) {
			float qc = q[(size_t)c * ldq + j] * scale, *pj = p +
			    (size_t)j * n;

#pragma omp simd
			for (t = 0; t < n; t++)
				pj[t] += qc * kr[t];
		}
	}
	for (j = 0; j < nq; j++)
		layer_softmax(p + (size_t)j * n, n);
	for (c = 0; c + 8 <= dh; c += 8)
		for (j = 0; j < nq; j++)
			weighted8(p + (size_t)j * n, v + (size_t)c * ldk, ldk,
			    n, out + (size_t)c * ldo + j, ldo);
	for (; c < dh; c++) {
		const float *vr = v + (size_t)c * ldk;

		for (j = 0; j < nq; j++) {
			const float *pj = p + (size_t)j * n;
			float acc = 0.0f;

#pragma omp simd reduction(+:acc)
			for (t = 0; t < n; t++)
				acc += pj[t] * vr[t];
			out[(size_t)c * ldo + j] = acc;
		}
	}
}

/*
 * Token-major K and V (layers.h): the keys a step reads are one
 * contiguous block per head, which streams from memory at full speed,
 * where the channel-major [dh][n_text_ctx] rows of the caches (the
 * first n of each 448) came at a fraction of it: the 5-beam step of
 * base spent 15% of its time there. Each score is a dot product of dh
 * channels, and the output accumulates dh channels of each value row.
 */
#define ATTEND_TM(name, elem_t, value)					\
CLONES void								\
name(const float *q, int ldq, const elem_t *k, const elem_t *v, int n,	\
    int dh, float scale, float *out, int ldo, float *p)			\
{									\
	float qs[LAYER_DH_MAX], acc[LAYER_DH_MAX];			\
	int c, t;							\
									\
	for (c = 0; c < dh; c++) {					\
		qs[c] = q[(size_t)c * ldq] * scale;			\
		acc[c] = 0.0f;						\
	}								\
	for (t = 0; t < n; t++) {					\
		const elem_t *kt = k + (size_t)t * dh;			\
		float s = 0.0f;						\
									\
		_Pragma("omp simd reduction(+:s)")			\
		for (c = 0; c < dh; c++)				\
			s += qs[c] * value(kt[c]);			\
		p[t] = s;						\
	}								\
	layer_softmax(p, n);						\
	for (t = 0; t < n; t++) {					\
		const elem_t *vt = v + (size_t)t * dh;			\
		float pt = p[t];					\
									\
		_Pragma("omp simd")					\
		for (c = 0; c < dh; c++)				\
			acc[c] += pt * value(vt[c]);			\
	}								\
	for (c = 0; c < dh; c++)					\
		out[(size_t)c * ldo] = acc[c];				\
}

#define F32_VALUE(x)	(x)
ATTEND_TM(layer_attend_tm, float, F32_VALUE)
ATTEND_TM(layer_attend_tm_bf16, uint16_t, bf16_value)
