/*
 * The output head (logits over the vocabulary) in two passes, for bf16
 * models on AMX.
 *
 * Why: the head reads the whole token embedding at every decoder step
 * (51864 x d: 40 MB in bf16 for tiny, 53 MB for base), most of a step's
 * memory traffic, and the step is bound by memory. Here
 *
 * 1. every logit is estimated from int8 weights (per-row scale) and the
 *    int8-rounded hidden state (per-column scale) by AMX int8 tile
 *    products, reading half the bytes;
 * 2. the LOGITS_EXACT largest estimates of each column are recomputed
 *    from the model's f16 weights in f32, which is more exact than the
 *    bf16 product this replaces.
 *
 * Decoding looks at the top of the distribution (argmax, beam candidates,
 * the timestamp rules' maxima); the estimated tail only enters through
 * log-sum-exp terms, where its share is small and its error (< 1% of a
 * logit) smaller still.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "err.h"
#include "logits.h"

#define AMX_TARGET	AMX_TARGET_INT8
#define KC	64		/* int8 values of k per tile row */
#define T_C	0
#define T_A	1
#define T_B	2

struct logits_head {
	int n_vocab, d, blocks;
	int8_t *w;		/* [blocks][d / KC][16][KC] */
	float *scale;		/* [blocks * 16] */
	const uint16_t *f16;	/* [n_vocab][d] in the mapping, borrowed */
};

/* Row v to int8 with scale max|w| / 127 into its place in the blocks. */
AMX_TARGET static void
quantize_row(struct logits_head *lh, int v)
{
	const uint16_t *row = lh->f16 + (size_t)v * lh->d;
	__m512 mx = _mm512_setzero_ps(), inv;
	float max;
	int k;

	for (k = 0; k < lh->d; k += 16)
		mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(row + k)))));
	max = _mm512_reduce_max_ps(mx);
	lh->scale[v] = max / 127.0f;
	inv = _mm512_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
	for (k = 0; k < lh->d; k += 16) {
		__m512 w = _mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(row + k)));
		int8_t *o = lh->w + (((size_t)(v / 16) * (lh->d / KC) +
		    k / KC) * 16 + v % 16) * KC + k % KC;

		_mm_storeu_si128((__m128i *)o, _mm512_cvtsepi32_epi8(
		    _mm512_cvtps_epi32(_mm512_mul_ps(w, inv))));
	}
}

int
logits_head_new(const void *f16, int n_vocab, int d,
    struct logits_head **ret, char *err)
{
	struct logits_head *lh;
	int v;

	if (d % KC != 0)
		return err_set(err, SOTTO_EINVAL, "int8 output head needs a "
		    "width that is a multiple of %d, not %d", KC, d);
	if ((lh = calloc(1, sizeof(*lh))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	lh->n_vocab = n_vocab;
	lh->d = d;
	lh->blocks = (n_vocab + 15) / 16;
	lh->f16 = f16;
	lh->w = aligned_alloc(64, (size_t)lh->blocks * 16 * d);
	lh->scale = calloc((size_t)lh->blocks * 16, sizeof(float));
	if (lh->w == NULL || lh->scale == NULL) {
		logits_head_free(lh);
		return err_set(err, SOTTO_ENOMEM, "out of memory for the "
		    "int8 output head");
	}
	memset(lh->w, 0, (size_t)lh->blocks * 16 * d);
#pragma omp parallel for schedule(static)
	for (v = 0; v < n_vocab; v++)
		quantize_row(lh, v);
	*ret = lh;
	return 0;
}

void
logits_head_free(struct logits_head *lh)
{
	if (lh == NULL)
		return;
	free(lh->w);
	free(lh->scale);
	free(lh);
}

/*
 * Columns of x [d][n] (rows ldx apart) to int8 with a scale per column,
 * laid out as B tiles: xq[c][r][j][4] = x[KC c + 4 r + {0..3}][j].
 */
static void
quantize_x(const struct logits_head *lh, const float *x, int ldx, int n,
    int8_t *xq, float *sx)
{
	int d = lh->d, j, k;

	memset(xq, 0, LOGITS_SCRATCH(d));
	for (j = 0; j < n; j++) {
		float max = 0.0f, inv;

		for (k = 0; k < d; k++)
			max = fmaxf(max, fabsf(x[(size_t)k * ldx + j]));
		sx[j] = max / 127.0f;
		inv = max > 0.0f ? 127.0f / max : 0.0f;
		for (k = 0; k < d; k++)
			xq[((size_t)(k / KC) * 16 + (k % KC) / 4) * 64 +
			    j * 4 + k % 4] = (int8_t)lrintf(x[(size_t)k *
			    ldx + j] * inv);
	}
}

/* Estimates for blocks [b0, b1) into out[j][v] (rows n_vocab apart). */
AMX_TARGET static void
estimate(const struct logits_head *lh, const int8_t *xq, const float *sx,
    int n, float *out, int b0, int b1)
{
	int32_t acc[16][16];
	int kc = lh->d / KC, b, c, i, j;

	AMX_CONFIGURE(3);
	for (b = b0; b < b1; b++) {
		_tile_zero(T_C);
		for (c = 0; c < kc; c++) {
			/* as gemv.c: the hardware prefetcher alone is slower */
			_mm_prefetch((const char *)lh->w + ((size_t)b * kc +
			    c) * 1024 + 16384, _MM_HINT_T0);
			_tile_loadd(T_A, lh->w + ((size_t)b * kc + c) * 1024,
			    64);
			_tile_loadd(T_B, xq + (size_t)c * 1024, 64);
			_tile_dpbssd(T_C, T_A, T_B);
		}
		_tile_stored(T_C, acc, 64);
		for (i = 0; i < 16 && b * 16 + i < lh->n_vocab; i++) {
			float s = lh->scale[b * 16 + i];

			for (j = 0; j < n; j++)
				out[(size_t)j * lh->n_vocab + b * 16 + i] =
				    (float)acc[i][j] * s * sx[j];
		}
	}
	_tile_release();
}

/* The LOGITS_EXACT largest of row[0..n) into top (indices), any order. */
static void
top_indices(const float *row, int n, int *top)
{
	float val[LOGITS_EXACT];
	int i, k, min_at = 0;

	for (k = 0; k < LOGITS_EXACT; k++) {
		top[k] = k;
		val[k] = row[k];
		if (val[k] < val[min_at])
			min_at = k;
	}
	for (i = LOGITS_EXACT; i < n; i++) {
		if (row[i] <= val[min_at])
			continue;
		top[min_at] = i;
		val[min_at] = row[i];
		for (k = 0; k < LOGITS_EXACT; k++)
			if (val[k] < val[min_at])
				min_at = k;
	}
}

/* f16 row v . column j of x, in f32. */
AMX_TARGET static float
exact_dot(const struct logits_head *lh, int v, const float *x, int ldx, int j)
{
	const uint16_t *row = lh->f16 + (size_t)v * lh->d;
	__m512 acc = _mm512_setzero_ps();
	float col[16];
	int k, t;

	for (k = 0; k < lh->d; k += 16) {
		for (t = 0; t < 16; t++)
			col[t] = x[(size_t)(k + t) * ldx + j];
		acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(row + k))), _mm512_loadu_ps(col), acc);
	}
	return _mm512_reduce_add_ps(acc);
}

int
logits_head_run(const struct logits_head *lh, const float *x, int ldx,
    int n, float *out, int8_t *scratch, char *err)
{
	float sx[16];
	int j;

	if (n < 1 || n > 16 || lh->n_vocab < LOGITS_EXACT)
		return err_set(err, SOTTO_EINVAL, "int8 output head: %d "
		    "columns", n);
	quantize_x(lh, x, ldx, n, scratch, sx);
#pragma omp parallel
	{
		int t = omp_get_thread_num(), nt = omp_get_num_threads();

		estimate(lh, scratch, sx, n, out, (int)((long long)lh->blocks *
		    t / nt), (int)((long long)lh->blocks * (t + 1) / nt));
	}
	for (j = 0; j < n; j++) {
		float *row = out + (size_t)j * lh->n_vocab;
		int top[LOGITS_EXACT], k;

		top_indices(row, lh->n_vocab, top);
		for (k = 0; k < LOGITS_EXACT; k++)
			row[top[k]] = exact_dot(lh, top[k], x, ldx, j);
	}
	return 0;
}
