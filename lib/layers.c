/*
 * Kernels over channels-first activations.
 *
 * Loops run over the contiguous sequence axis so the compiler vectorises
 * them; target_clones builds AVX-512 and AVX2 variants picked at load.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "layers.h"

#define LAYER_EPS	1e-5f
#define CLONES	__attribute__((target_clones("arch=x86-64-v4", \
	"arch=x86-64-v3", "default")))

/* ref: whisper/model.py LayerNorm (fp32), normalising over channels. */
CLONES void
layer_norm(const float *x, float *y, int c, int s, int ld, const float *w,
    const float *b, float *sum)
{
	float *mean = sum, *var = sum + s;
	int i, j;

	for (j = 0; j < s; j++)
		mean[j] = var[j] = 0.0f;
	for (i = 0; i < c; i++)
		for (j = 0; j < s; j++)
			mean[j] += x[(size_t)i * ld + j];
	for (j = 0; j < s; j++)
		mean[j] /= (float)c;
	for (i = 0; i < c; i++)
		for (j = 0; j < s; j++) {
			float d = x[(size_t)i * ld + j] - mean[j];

			var[j] += d * d;
		}
	for (j = 0; j < s; j++)
		var[j] = 1.0f / sqrtf(var[j] / (float)c + LAYER_EPS);
	for (i = 0; i < c; i++)
		for (j = 0; j < s; j++)
			y[(size_t)i * ld + j] = (x[(size_t)i * ld + j] -
			    mean[j]) * var[j] * w[i] + b[i];
}

CLONES void
layer_add_bias(float *x, int c, int s, int ld, const float *b)
{
	int i, j;

	for (i = 0; i < c; i++)
		for (j = 0; j < s; j++)
			x[(size_t)i * ld + j] += b[i];
}

void
layer_bias_gelu(float *x, int c, int s, int ld, const float *b)
{
	int i, j;

	for (i = 0; i < c; i++)
		for (j = 0; j < s; j++) {
			float v = x[(size_t)i * ld + j] + b[i];

			x[(size_t)i * ld + j] = 0.5f * v *
			    (1.0f + erff(v * (float)M_SQRT1_2));
		}
}

CLONES void
layer_add(float *y, const float *x, int c, int s, int ld)
{
	int i, j;

	for (i = 0; i < c; i++)
		for (j = 0; j < s; j++)
			y[(size_t)i * ld + j] += x[(size_t)i * ld + j];
}

/*
 * exp(x) = 2^k * exp(r), r = x - k ln2 in [-ln2/2, ln2/2], with a degree-6
 * polynomial for exp(r): within ~1 ulp of expf over the softmax range and
 * branch-free so it vectorises (scalar expf cost 100+ ms per encoder pass).
 */
CLONES void
layer_exp(const float *x, float *y, int n)
{
	const float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
	int i;

	for (i = 0; i < n; i++) {
		float v = x[i], r, p, k;
		int32_t ki;
		uint32_t bits;

		v = v < -87.0f ? -87.0f : (v > 88.0f ? 88.0f : v);
		k = floorf(v * 1.44269504088896341f + 0.5f);
		r = v - k * ln2_hi - k * ln2_lo;
		p = 1.0f / 720.0f;
		p = p * r + 1.0f / 120.0f;
		p = p * r + 1.0f / 24.0f;
		p = p * r + 1.0f / 6.0f;
		p = p * r + 0.5f;
		p = p * r + 1.0f;
		p = p * r + 1.0f;
		ki = (int32_t)k;
		bits = (uint32_t)(ki + 127) << 23;
		memcpy(&k, &bits, sizeof(k));
		y[i] = x[i] < -87.0f ? 0.0f : p * k;
	}
}

CLONES void
layer_softmax(float *x, int n)
{
	float max = -INFINITY, sum = 0.0f, inv;
	int i;

	for (i = 0; i < n; i++)
		max = x[i] > max ? x[i] : max;
	for (i = 0; i < n; i++)
		x[i] -= max;
	layer_exp(x, x, n);
	for (i = 0; i < n; i++)
		sum += x[i];
	inv = 1.0f / sum;
	for (i = 0; i < n; i++)
		x[i] *= inv;
}
