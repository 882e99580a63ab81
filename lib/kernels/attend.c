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

/* keys a pass: 8 rows of K or V, 8 KB, and the queries' 1 KB each in L1 */
#define CHUNK	256
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

typedef float v8 __attribute__((vector_size(32)));
typedef float v8u __attribute__((vector_size(32), aligned(4)));

/* macros: a function taking or returning a v8 changes the default ABI */
#define ld8(x)		(*(const v8u *)(x))
#define bcast8(x)	((v8){ (x), (x), (x), (x), (x), (x), (x), (x) })
#define hsum8(a)	((((a)[0] + (a)[4]) + ((a)[2] + (a)[6])) + \
			    (((a)[1] + (a)[5]) + ((a)[3] + (a)[7])))

/*
 * The weighted sums sum_t p[t] V[c][t] of 8 channels (rows ldk apart)
 * over keys [t0, t1), a multiple of 8 apart, carried in acc[8]: lane l
 * of a sum adds the keys t = l (mod 8) in order, so that a sum split
 * into parts is the same float as one pass (finish_sum adds the lanes
 * and the keys past the last whole vector). Eight sums in flight: one at
 * a time waited on its own additions (5 beams' cross-attention of tiny.en
 * took 2.05 ms against 1.73, AVX-512, 1 thread, least of 30; four
 * against eight 2.44 against 1.87, AVX2, Zen 3).
 */
static inline void
weighted8(const float *p, const float *v, int ldk, int t0, int t1, v8 *acc)
{
	const float *v0 = v, *v1 = v0 + ldk, *v2 = v1 + ldk, *v3 = v2 + ldk;
	const float *v4 = v3 + ldk, *v5 = v4 + ldk, *v6 = v5 + ldk;
	const float *v7 = v6 + ldk;
	v8 a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
	v8 a4 = acc[4], a5 = acc[5], a6 = acc[6], a7 = acc[7], pt;
	int t;

	for (t = t0; t < t1; t += 8) {
		pt = ld8(p + t);
		a0 = a0 + pt * ld8(v0 + t);
		a1 = a1 + pt * ld8(v1 + t);
		a2 = a2 + pt * ld8(v2 + t);
		a3 = a3 + pt * ld8(v3 + t);
		a4 = a4 + pt * ld8(v4 + t);
		a5 = a5 + pt * ld8(v5 + t);
		a6 = a6 + pt * ld8(v6 + t);
		a7 = a7 + pt * ld8(v7 + t);
	}
	acc[0] = a0;
	acc[1] = a1;
	acc[2] = a2;
	acc[3] = a3;
	acc[4] = a4;
	acc[5] = a5;
	acc[6] = a6;
	acc[7] = a7;
}

/* As weighted8, one channel. */
static inline void
weighted1(const float *p, const float *v, int t0, int t1, v8 *acc)
{
	v8 a = *acc;
	int t;

	for (t = t0; t < t1; t += 8)
		a = a + ld8(p + t) * ld8(v + t);
	*acc = a;
}

/* A sum of weighted8 or weighted1 (keys up to n8) and keys n8 .. n - 1. */
static inline float
finish_sum(const v8 *acc, const float *p, const float *v, int n8, int n)
{
	float s = hsum8(*acc);
	int t;

	for (t = n8; t < n; t++)
		s += p[t] * v[t];
	return s;
}

/*
 * nq queries (consecutive columns of q, channel stride ldq) against the
 * same n keys of one head, channels-first: p = softmax(scale q.K),
 * out[c * ldo + j] = sum_t p[j][t] V[c][t]. K and V are [dh][ldk] and are
 * read once for all queries (they do not fit in cache for long windows):
 * 8 rows of CHUNK keys at a time, which stay in L1 while each query
 * takes its turn; with whole rows (48 KB for a window) the queries after
 * the first read them again from L2, and 5 beams took 2.5 times one.
 * Each query's floats are the same whatever queries are beside it.
 * p is nq * n floats of scratch.
 */
CLONES void
layer_attend(const float *q, int ldq, int nq, const float *k, const float *v,
    int ldk, int n, int dh, float scale, float *out, int ldo, float *p)
{
	v8 acc[LAYER_ATTEND_MAX_Q][8];
	float qs[8];
	int n8 = n / 8 * 8, c, t, j, i, t0, len, r, rows;

	for (t = 0; t < nq * n; t++)
		p[t] = 0.0f;
	for (c = 0; c + 8 <= dh; c += 8)
		for (t0 = 0; t0 < n; t0 += CHUNK) {
			len = n - t0 < CHUNK ? n - t0 : CHUNK;
			for (j = 0; j < nq; j++) {
				for (i = 0; i < 8; i++)
					qs[i] = q[(size_t)(c + i) * ldq + j] *
					    scale;
				scores8(qs, k + (size_t)c * ldk + t0, ldk, len,
				    p + (size_t)j * n + t0);
			}
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
	for (c = 0; c < dh; c += rows) {
		rows = dh - c >= 8 ? 8 : 1;
		memset(acc, 0, sizeof(acc[0]) * nq);
		for (t0 = 0; t0 < n8; t0 += CHUNK) {
			int t1 = n8 - t0 < CHUNK ? n8 : t0 + CHUNK;

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
				    &acc[j][r], p + (size_t)j * n, v +
				    (size_t)(c + r) * ldk, n8, n);
	}
}

/*
 * Token-major K and V (layers.h): the keys a step reads are one
 * contiguous block per head, which streams from memory at full speed,
 * where the channel-major [dh][n_text_ctx] rows of the caches (the
 * first n of each 448) came at a fraction of it: the 5-beam step of
 * base spent 15% of its time there. Each score is a dot product of dh
 * channels, and the output accumulates dh channels of each value row:
 * for dh 64 (every Whisper) in eight named vectors. GCC made the loop
 * over the channels scalar, each sum stored and loaded again at every
 * key, and that loop was most of the kernel's time (AVX2, 5 beams);
 * each channel's sum is the same, added key by key in order.
 */
#define ATTEND_TM(name, elem_t, value, load8)				\
CLONES void								\
name(const float *q, int ldq, const elem_t *k, const elem_t *v,		\
    const int32_t *slot, size_t slot_stride, int n, int dh, float scale,	\
    float *out, int ldo, float *p)					\
{									\
	float qs[LAYER_DH_MAX], acc[LAYER_DH_MAX];			\
	int c, t;							\
									\
	for (c = 0; c < dh; c++) {					\
		qs[c] = q[(size_t)c * ldq] * scale;			\
		acc[c] = 0.0f;						\
	}								\
	for (t = 0; t < n; t++) {					\
		const elem_t *kt = k + (size_t)slot[t] * slot_stride +	\
		    (size_t)t * dh;					\
		float s = 0.0f;						\
									\
		_Pragma("omp simd reduction(+:s)")			\
		for (c = 0; c < dh; c++)				\
			s += qs[c] * value(kt[c]);			\
		p[t] = s;						\
	}								\
	layer_softmax(p, n);						\
	if (dh == 64) {							\
		v8 a0 = { 0 }, a1 = a0, a2 = a0, a3 = a0, a4 = a0;	\
		v8 a5 = a0, a6 = a0, a7 = a0, pt;			\
									\
		for (t = 0; t < n; t++) {				\
			const elem_t *vt = v + (size_t)slot[t] *	\
			    slot_stride + (size_t)t * 64;		\
									\
			pt = bcast8(p[t]);				\
			a0 = a0 + pt * load8(vt);			\
			a1 = a1 + pt * load8(vt + 8);			\
			a2 = a2 + pt * load8(vt + 16);			\
			a3 = a3 + pt * load8(vt + 24);			\
			a4 = a4 + pt * load8(vt + 32);			\
			a5 = a5 + pt * load8(vt + 40);			\
			a6 = a6 + pt * load8(vt + 48);			\
			a7 = a7 + pt * load8(vt + 56);			\
		}							\
		for (c = 0; c < 8; c++) {				\
			out[(size_t)c * ldo] = a0[c];			\
			out[(size_t)(c + 8) * ldo] = a1[c];		\
			out[(size_t)(c + 16) * ldo] = a2[c];		\
			out[(size_t)(c + 24) * ldo] = a3[c];		\
			out[(size_t)(c + 32) * ldo] = a4[c];		\
			out[(size_t)(c + 40) * ldo] = a5[c];		\
			out[(size_t)(c + 48) * ldo] = a6[c];		\
			out[(size_t)(c + 56) * ldo] = a7[c];		\
		}							\
		return;							\
	}								\
	for (t = 0; t < n; t++) {					\
		const elem_t *vt = v + (size_t)slot[t] * slot_stride +	\
		    (size_t)t * dh;					\
		float pt = p[t];					\
									\
		_Pragma("omp simd")					\
		for (c = 0; c < dh; c++)				\
			acc[c] += pt * value(vt[c]);			\
	}								\
	for (c = 0; c < dh; c++)					\
		out[(size_t)c * ldo] = acc[c];				\
}

typedef uint16_t v8h __attribute__((vector_size(16), aligned(2)));
typedef uint32_t v8i __attribute__((vector_size(32)));

#define F32_VALUE(x)	(x)
/* bf16 is the high half of a float's bits (a vector cast reinterprets) */
#define BF16_LOAD8(x)	((v8)(__builtin_convertvector(*(const v8h *)(x), \
			    v8i) << 16))
ATTEND_TM(layer_attend_tm, float, F32_VALUE, ld8)
ATTEND_TM(layer_attend_tm_bf16, uint16_t, bf16_value, BF16_LOAD8)
