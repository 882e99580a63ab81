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

#include "clones.h"
#include "layers.h"

#define LAYER_EPS	1e-5f
#define PAR_MIN		(64 * 1024)	/* elements before going parallel */
#define COL_BLOCK	128
#define GELU_PAR_MIN	4096	/* GELU values of a step before going parallel */
#define GELU_ROWS	64	/* rows of a step's GELU per share */

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

	if ((size_t)c * s <= PAR_MIN && s <= COL_BLOCK) {	/* see small() */
		norm_cols(x, y, c, 0, s, ld, w, b);
		return;
	}
#pragma omp parallel for schedule(static) if ((size_t)c * s > PAR_MIN)
	for (blk = 0; blk < s; blk += COL_BLOCK)
		norm_cols(x, y, c, blk, blk + COL_BLOCK < s ? blk + COL_BLOCK :
		    s, ld, w, b);
}

/*
 * A decoder step's few columns, rows contiguous: one loop over the block
 * and no parallel region. A region under if (0) still cost libgomp's
 * team set-up, and a call per row of 1-5 values more than its additions:
 * a step of base made 68 such calls (adds, biases, norms), 1.3-4.4 us
 * each.
 */
static int
small(int c, int s, int ld)
{
	return (size_t)c * s <= PAR_MIN && s < 16 && ld == s;
}

void
layer_add_bias(float *x, int c, int s, int ld, const float *b)
{
	int i, j;

	if (small(c, s, ld)) {
		for (i = 0; i < c; i++)
			for (j = 0; j < s; j++)
				x[(size_t)i * s + j] += b[i];
		return;
	}
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
	size_t k;
	int i;

	if (small(c, s, ld)) {
		for (k = 0; k < (size_t)c * s; k++)
			y[k] += x[k];
		return;
	}
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
