/*
 * Element-wise and normalisation kernels on channels-first activations
 * x[C][S] (row stride ld >= S). They vectorise over S, the contiguous axis.
 */
#ifndef SOTTO_LAYERS_H
#define SOTTO_LAYERS_H

#include <stddef.h>
#include <stdint.h>

/*
 * y = LayerNorm over the C channels of each position (eps 1e-5), times w
 * plus b. y may not alias x.
 */
void	layer_norm(const float *x, float *y, int c, int s, int ld,
	    const float *w, const float *b);

/* x[i][j] += b[i] for each row. */
void	layer_add_bias(float *x, int c, int s, int ld, const float *b);

/* x = gelu(x + b), the exact erf form. */
void	layer_bias_gelu(float *x, int c, int s, int ld, const float *b);

/* y += x (both [c][s]). */
void	layer_gelu(float *x, int c, int s, int ld);

void	layer_add(float *y, const float *x, int c, int s, int ld);

/* Row-wise softmax of n values, in place. */
void	layer_softmax(float *x, int n);
/*
 * x[i] = exp(x[i] - max x) over x[n], and their sum: a softmax whose
 * division the caller does later, on fewer values.
 */
float	layer_exp_sum(float *x, int n);

/* exp of n values into y; about 1 ulp, vectorisable. */
void	layer_exp(const float *x, float *y, int n);

/*
 * nq queries (consecutive columns, channel stride ldq; at most
 * LAYER_ATTEND_MAX_Q) against n keys of one head: out[c * ldo + j] =
 * softmax(scale q_j.K) V, K and V [dh][ldk] read once for all queries;
 * p is nq * n floats of scratch.
 */
#define LAYER_ATTEND_MAX_Q	16

/*
 * layer_attend with K and V in IEEE binary16 (attend-f16.c); needs AVX2,
 * FMA and F16C (gemv_i8_avx2_supported()), as do the conversions below.
 */
void	layer_attend_f16(const float *q, int ldq, int nq, const uint16_t *k,
	    const uint16_t *v, int ldk, int n, int dh, float scale,
	    float *out, int ldo, float *p);
/* y = x rounded to binary16 (nearest even), and back. */
void	layer_to_f16(const float *x, uint16_t *y, size_t n);
void	layer_from_f16(const uint16_t *x, float *y, size_t n);
void	layer_attend(const float *q, int ldq, int nq, const float *k,
	    const float *v, int ldk, int n, int dh, float scale, float *out,
	    int ldo, float *p);

/*
 * One query (channel stride ldq) against n keys of one head stored
 * token-major (the decoder's self-attention caches): key t is
 * k[slot[t] * slot_stride + t * dh ...] (dh values), value t the same of
 * v, so that beams share the positions they have in common instead of
 * copying them; out[c * ldo] = softmax(scale q.k) v; dh at most
 * LAYER_DH_MAX; p is n floats of scratch. The _bf16 form reads bf16
 * K and V.
 */
#define LAYER_DH_MAX	128
void	layer_attend_tm(const float *q, int ldq, const float *k,
	    const float *v, const int32_t *slot, size_t slot_stride, int n,
	    int dh, float scale, float *out, int ldo, float *p);
void	layer_attend_tm_bf16(const float *q, int ldq, const uint16_t *k,
	    const uint16_t *v, const int32_t *slot, size_t slot_stride,
	    int n, int dh, float scale, float *out, int ldo, float *p);

/* The largest of n values (-inf for none). */
float	layer_max(const float *x, int n);

/* log(sum(exp(x))); -inf entries count as zero. */
float	layer_logsumexp(const float *x, int n);

/* y = x - c. */
void	layer_sub(const float *x, float c, float *y, int n);

/* y = x rounded to bf16 (nearest even). */
void	layer_to_bf16(const float *x, uint16_t *y, size_t n);

#endif
