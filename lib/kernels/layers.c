/*
 * Kernels over channels-first activations.
 *
 * Each kernel works on rows (channels) or column blocks (positions) with
 * an inner loop over the contiguous sequence axis, built by target_clones
 * for AVX-512 and AVX2 and picked at load; OpenMP spreads the rows over
 * the compute threads when there is enough work to pay for it.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "amx.h"
#include "layers.h"

#define LAYER_EPS	1e-5f
#define PAR_MIN		(64 * 1024)	/* elements before going parallel */
#define COL_BLOCK	128
#define GELU_PAR_MIN	4096	/* GELU values of a step before going parallel */
#define GELU_ROWS	64	/* rows of a step's GELU per share */
#define CLONES	__attribute__((target_clones("arch=x86-64-v4", \
	"arch=x86-64-v3", "default")))

/*
 * Range reduction plus a degree-6 polynomial: ~1 ulp, branch-free. In
 * fused multiply-adds (fmaf: -std=c17 contracts nothing by itself): as
 * separate multiplies and adds they were most of the encoder softmax's
 * time on AVX2, 0.95 ns a score.
 */
#pragma omp declare simd notinbranch
static inline float
exp_approx(float v)
{
	const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
	float x = v < -87.0f ? -87.0f : (v > 88.0f ? 88.0f : v), r, p, k, s;
	uint32_t bits;

	k = floorf(fmaf(x, 1.44269504088896341f, 0.5f));
	r = fmaf(-k, ln2_lo, fmaf(-k, ln2_hi, x));
	p = fmaf(1.0f / 720.0f, r, 1.0f / 120.0f);
	p = fmaf(p, r, 1.0f / 24.0f);
	p = fmaf(p, r, 1.0f / 6.0f);
	p = fmaf(p, r, 0.5f);
	p = fmaf(p, r, 1.0f);
	p = fmaf(p, r, 1.0f);
	bits = (uint32_t)((int32_t)k + 127) << 23;
	memcpy(&s, &bits, sizeof(s));
	return v < -87.0f ? 0.0f : p * s;
}

/*
 * GELU with erf from erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2)
 * (fractional error < 1.2e-7), so it vectorises; scalar erff cost more
 * than the encoder's matrix products once those ran in bf16.
 */
#pragma omp declare simd notinbranch
static inline float
gelu(float v)
{
	float z = fabsf(v) * (float)M_SQRT1_2, t, p, erfc_z;

	t = 1.0f / fmaf(0.5f, z, 1.0f);
	p = fmaf(0.17087277f, t, -0.82215223f);
	p = fmaf(p, t, 1.48851587f);
	p = fmaf(p, t, -1.13520398f);
	p = fmaf(p, t, 0.27886807f);
	p = fmaf(p, t, -0.18628806f);
	p = fmaf(p, t, 0.09678418f);
	p = fmaf(p, t, 0.37409196f);
	p = fmaf(p, t, 1.00002368f);
	p = fmaf(p, t, -1.26551223f);
	erfc_z = t * exp_approx(fmaf(-z, z, p));
	return 0.5f * v * (v >= 0.0f ? 2.0f - erfc_z : erfc_z);
}

CLONES static void
row_bias_gelu(float *x, int s, float b)
{
	int j;

#pragma omp simd
	for (j = 0; j < s; j++)
		x[j] = gelu(x[j] + b);
}

CLONES static void
row_add_scalar(float *x, int s, float b)
{
	int j;

	for (j = 0; j < s; j++)
		x[j] += b;
}

CLONES static void
row_add(float *y, const float *x, int s)
{
	int j;

	for (j = 0; j < s; j++)
		y[j] += x[j];
}

/* LayerNorm of columns [j0, j1): two passes for mean and variance. */
CLONES static void
norm_cols(const float *x, float *y, int c, int j0, int j1, int ld,
    const float *w, const float *b)
{
	float mean[COL_BLOCK], inv[COL_BLOCK];
	int i, j, n = j1 - j0;

	for (j = 0; j < n; j++)
		mean[j] = inv[j] = 0.0f;
	for (i = 0; i < c; i++)
		for (j = 0; j < n; j++)
			mean[j] += x[(size_t)i * ld + j0 + j];
	for (j = 0; j < n; j++)
		mean[j] /= (float)c;
	for (i = 0; i < c; i++)
		for (j = 0; j < n; j++) {
			float d = x[(size_t)i * ld + j0 + j] - mean[j];

			inv[j] += d * d;
		}
	for (j = 0; j < n; j++)
		inv[j] = 1.0f / sqrtf(inv[j] / (float)c + LAYER_EPS);
	for (i = 0; i < c; i++)
		for (j = 0; j < n; j++)
			y[(size_t)i * ld + j0 + j] = (x[(size_t)i * ld + j0 +
			    j] - mean[j]) * inv[j] * w[i] + b[i];
}

/* ref: whisper/model.py LayerNorm (fp32), normalising over channels. */
void
layer_norm(const float *x, float *y, int c, int s, int ld, const float *w,
    const float *b)
{
	int blk;

#pragma omp parallel for schedule(static) if ((size_t)c * s > PAR_MIN)
	for (blk = 0; blk < s; blk += COL_BLOCK)
		norm_cols(x, y, c, blk, blk + COL_BLOCK < s ? blk + COL_BLOCK :
		    s, ld, w, b);
}

void
layer_add_bias(float *x, int c, int s, int ld, const float *b)
{
	int i;

#pragma omp parallel for schedule(static) if ((size_t)c * s > PAR_MIN)
	for (i = 0; i < c; i++)
		row_add_scalar(x + (size_t)i * ld, s, b[i]);
}

CLONES static void
flat_gelu(float *x, size_t n)
{
	size_t i;

#pragma omp simd
	for (i = 0; i < n; i++)
		x[i] = gelu(x[i]);
}

void
layer_bias_gelu(float *x, int c, int s, int ld, const float *b)
{
	int i;

	/*
	 * A decoder step has a few columns: rows of 1-8 values leave the
	 * vector unit idle, so add the bias in place (a call per row cost
	 * more than its additions) and run GELU over the whole contiguous
	 * block.
	 */
	if (s < 16 && ld == s) {
		/*
		 * Shared among the threads from a few thousand values (5 beams'
		 * 4d): done by one, it was the longest gap between a step's
		 * parallel regions (about 30 us), long enough for the other
		 * thread to fall asleep before fc2.
		 */
#pragma omp parallel for schedule(static) if ((size_t)c * s > GELU_PAR_MIN)
		for (i = 0; i < c; i += GELU_ROWS) {
			int r, j, nr = c - i < GELU_ROWS ? c - i : GELU_ROWS;

			for (r = i; r < i + nr; r++)
				for (j = 0; j < s; j++)
					x[(size_t)r * s + j] += b[r];
			flat_gelu(x + (size_t)i * s, (size_t)nr * s);
		}
		return;
	}
#pragma omp parallel for schedule(static) if ((size_t)c * s > PAR_MIN)
	for (i = 0; i < c; i++)
		row_bias_gelu(x + (size_t)i * ld, s, b[i]);
}

void
layer_gelu(float *x, int c, int s, int ld)
{
	int i;

#pragma omp parallel for schedule(static) if ((size_t)c * s > PAR_MIN)
	for (i = 0; i < c; i++)
		flat_gelu(x + (size_t)i * ld, (size_t)s);
}

void
layer_add(float *y, const float *x, int c, int s, int ld)
{
	int i;

#pragma omp parallel for schedule(static) if ((size_t)c * s > PAR_MIN)
	for (i = 0; i < c; i++)
		row_add(y + (size_t)i * ld, x + (size_t)i * ld, s);
}

CLONES void
layer_exp(const float *x, float *y, int n)
{
	int i;

#pragma omp simd
	for (i = 0; i < n; i++)
		y[i] = exp_approx(x[i]);
}

static inline float
exp_sum(float *x, int n)
{
	float max = -INFINITY, sum = 0.0f;
	int i;

#pragma omp simd reduction(max:max)
	for (i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
#pragma omp simd reduction(+:sum)
	for (i = 0; i < n; i++) {
		x[i] = exp_approx(x[i] - max);
		sum += x[i];
	}
	return sum;
}

CLONES void
layer_softmax(float *x, int n)
{
	float inv = 1.0f / exp_sum(x, n);
	int i;

#pragma omp simd
	for (i = 0; i < n; i++)
		x[i] *= inv;
}

CLONES float
layer_exp_sum(float *x, int n)
{
	return exp_sum(x, n);
}

/* Round to bf16, nearest even (as oneDNN and the hardware do). */
CLONES void
layer_to_bf16(const float *x, uint16_t *y, size_t n)
{
	size_t i;

#pragma omp simd
	for (i = 0; i < n; i++) {
		uint32_t u;

		memcpy(&u, &x[i], sizeof(u));
		u += 0x7fff + ((u >> 16) & 1);
		y[i] = (uint16_t)(u >> 16);
	}
}

CLONES float
layer_max(const float *x, int n)
{
	float max = -INFINITY;
	int i;

#pragma omp simd reduction(max:max)
	for (i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	return max;
}

/* log(sum(exp(x))) of n values; -inf entries count as zero. */
CLONES float
layer_logsumexp(const float *x, int n)
{
	float max = layer_max(x, n), sum = 0.0f;
	int i;

	if (max == -INFINITY)
		return max;
#pragma omp simd reduction(+:sum)
	for (i = 0; i < n; i++)
		sum += exp_approx(x[i] - max);
	return max + logf(sum);
}

/* y = x - c, the second half of a log-softmax. */
CLONES void
layer_sub(const float *x, float c, float *y, int n)
{
	int i;

#pragma omp simd
	for (i = 0; i < n; i++)
		y[i] = x[i] - c;
}

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
