/*
 * Attention of a few decoder queries: over the window's keys and values
 * (the cross-attention of a cached step, channels-first) and over the
 * self-attention caches (token-major). Built, like layers.c, by
 * target_clones for AVX-512 and AVX2.
 */
#include <stdint.h>
#include <string.h>

#include "amx.h"
#include "clones.h"
#include "layers.h"


#define AW_ELEM			float
#define AW_LOAD8(x)		ld8(x)
#define AW_VALUE(x)		(x)
#define AW_MADD8(a, b, c)	((c) + (a) * (b))
#define AW_MADD(a, b, c)	((c) + (a) * (b))
#define AW_ATTR
#define AW_NAME(x)		x##_f32
#include "attend-window.h"

CLONES void
layer_attend(const float *q, int ldq, int nq, const float *k, const float *v,
    int ldk, int n, int dh, float scale, float *out, int ldo, float *p)
{
	attend_f32(q, ldq, nq, k, v, ldk, n, dh, scale, out, ldo, p);
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
