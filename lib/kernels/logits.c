/*
 * The output head (logits over the vocabulary) in two passes, for bf16
 * models (on AMX, or by AVX512-VNNI dot products without it).
 *
 * Why: the head reads the whole token embedding at every decoder step
 * (51864 x d: 40 MB in bf16 for tiny, 53 MB for base), most of a step's
 * memory traffic, and the step is bound by memory. Here
 *
 * 1. every logit is estimated from 4-bit weights and the int8-rounded
 *    hidden state by AMX int8 tile products or vpdpbusd, reading a
 *    quarter of the bytes of bf16 (the nibbles are widened to bytes in
 *    registers or L1 just before their product);
 * 2. the LOGITS_EXACT largest estimates of each column are recomputed
 *    from the model's f16 weights in f32, which is more exact than the
 *    bf16 product this replaces.
 *
 * Decoding looks at the top of the distribution (argmax, beam candidates,
 * the timestamp rules' maxima); the estimated tail only enters through
 * log-sum-exp terms, where its share is small.
 *
 * The 4 bits hold each row after the channel means are taken out, with
 * the outlier channels (channel_stats()) zeroed and added back in f32,
 * one scale per row. The estimates' error is then about an eighth of the
 * logits' spread over the vocabulary (tests/unit/test-kernels.c).
 * Measured against the int8 head this replaces (tiny.en, base; decoder
 * steps alone, 150 steps x 4, alternating runs on a busy machine): a
 * greedy step took 4.3-5.0 ms against 6.0-6.9 (tiny) and 8.9-9.1 against
 * 12.2-12.8 (base); the greedy text of the 15 test files did not change
 * for tiny, and for base one more file gave the fp32 text.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "err.h"
#include "gemv.h"
#include "logits-private.h"

#define AMX_TARGET	AMX_TARGET_INT8
#define VNNI_TARGET	__attribute__((target( \
	"avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
/* code that either path runs */
#define AVX512_TARGET	__attribute__((target( \
	"avx512f,avx512bw,avx512vl,f16c,fma")))
/*
 * Row v, centred and without its outlier channels, to 4 bits with scale
 * max|w| / QMAX into its place in the blocks: in a tile row, byte i holds
 * k = i (low nibble) and k = i + KC / 2. The outlier channels' weights
 * go to out_w as they are.
 */
AVX512_TARGET static void
quantize_row(struct logits_head *lh, int v)
{
	const uint16_t *row = lh->f16 + (size_t)v * lh->d;
	float c[LOGITS_MAX_D], max;
	__m512 mx = _mm512_setzero_ps(), inv;
	int8_t q[KC];
	int k, i;

	for (k = 0; k < lh->d; k += 16)
		_mm512_storeu_ps(c + k, _mm512_sub_ps(_mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(row + k))),
		    _mm512_loadu_ps(lh->mean + k)));
	for (i = 0; i < lh->n_out; i++) {
		lh->out_w[(size_t)i * lh->blocks * 16 + v] = c[lh->out_c[i]];
		c[lh->out_c[i]] = 0.0f;
	}
	for (k = 0; k < lh->d; k += 16)
		mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(c + k)));
	max = _mm512_reduce_max_ps(mx);
	lh->scale[v] = max / QMAX;
	inv = _mm512_set1_ps(max > 0.0f ? QMAX / max : 0.0f);
	for (k = 0; k < lh->d; k += KC) {
		uint8_t *block = lh->w + (size_t)(v / 16) * lh->d * 8;

		for (i = 0; i < KC; i += 16)
			_mm_storeu_si128((__m128i *)(q + i),
			    _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(
			    _mm512_mul_ps(_mm512_loadu_ps(c + k + i), inv))));
		if (lh->kernel == LOGITS_AMX) {
			uint8_t *o = block + ((size_t)(k / KC) * 16 + v % 16) *
			    (KC / 2);

			for (i = 0; i < KC / 2; i++)
				o[i] = (uint8_t)((q[i] + ZERO) |
				    (q[i + KC / 2] + ZERO) << 4);
			continue;
		}
		for (i = 0; i < KC; i += 8) {
			uint8_t *o = block + ((size_t)(k + i) / 8 * 16 +
			    v % 16) * 4;
			int kk;

			for (kk = 0; kk < 4; kk++)
				o[kk] = (uint8_t)((q[i + kk] + ZERO) |
				    (q[i + 4 + kk] + ZERO) << 4);
		}
	}
}

/* Per channel, the sum and the sum of squares of rows [v0, v1) into s, q. */
AVX512_TARGET static void
row_sums(const struct logits_head *lh, int v0, int v1, float *s, float *q)
{
	int v, k;

	for (v = v0; v < v1; v++)
		for (k = 0; k < lh->d; k += 16) {
			__m512 e = _mm512_cvtph_ps(_mm256_loadu_si256(
			    (const __m256i *)(lh->f16 + (size_t)v * lh->d + k)));

			_mm512_storeu_ps(s + k, _mm512_add_ps(
			    _mm512_loadu_ps(s + k), e));
			_mm512_storeu_ps(q + k, _mm512_fmadd_ps(e, e,
			    _mm512_loadu_ps(q + k)));
		}
}

/*
 * Channel means over the vocabulary into lh->mean, and the channels whose
 * spread is over OUT_SD times the mean spread (largest first) into
 * out_c. Why: a few channels of Whisper's token embedding are far larger
 * than the rest (tiny.en's channel 192: mean 0.30, spread 0.09 against a
 * typical 0.008), and with one scale per row they would leave the other
 * channels a level or two of the 4 bits. The means add the same to every
 * logit of a column and come back as mean . x; the outliers are added in
 * f32.
 */
static int
channel_stats(struct logits_head *lh)
{
	int d = lh->d, c;
	double *sum = calloc((size_t)d * 2, sizeof(double)), *sq = sum + d;
	double mean_sd = 0.0, sd[LOGITS_MAX_D];

	if (sum == NULL)
		return -1;
#pragma omp parallel
	{
		float ps[LOGITS_MAX_D] = { 0 }, pq[LOGITS_MAX_D] = { 0 };
		int t = omp_get_thread_num(), nt = omp_get_num_threads(), k;
		int v0 = (int)((long long)lh->n_vocab * t / nt);
		int v1 = (int)((long long)lh->n_vocab * (t + 1) / nt);

		if (lh->kernel == LOGITS_AVX2)
			logits_avx2_row_sums(lh, v0, v1, ps, pq);
		else
			row_sums(lh, v0, v1, ps, pq);
#pragma omp critical
		for (k = 0; k < d; k++) {
			sum[k] += ps[k];
			sq[k] += pq[k];
		}
	}
	for (c = 0; c < d; c++) {
		double m = sum[c] / lh->n_vocab;
		double var = sq[c] / lh->n_vocab - m * m;

		lh->mean[c] = (float)m;
		sd[c] = sqrt(var > 0.0 ? var : 0.0);
		mean_sd += sd[c] / d;
	}
	free(sum);
	for (lh->n_out = 0; lh->n_out < MAX_OUT; lh->n_out++) {
		int best = -1;

		for (c = 0; c < d; c++)
			if (sd[c] > OUT_SD * mean_sd && (best < 0 ||
			    sd[c] > sd[best]))
				best = c;
		if (best < 0)
			break;
		lh->out_c[lh->n_out] = best;
		lh->mean[best] = 0.0f;
		sd[best] = 0.0;
	}
	return 0;
}

int
logits_head_new(const void *f16, int n_vocab, int d,
    enum logits_kernel kernel, struct logits_head **ret, char *err)
{
	struct logits_head *lh;
	int v;

	if (d % KC != 0 || d > LOGITS_MAX_D)
		return err_set(err, SOTTO_EINVAL, "4-bit output head needs a "
		    "width that is a multiple of %d up to %d, not %d", KC,
		    LOGITS_MAX_D, d);
	if ((lh = calloc(1, sizeof(*lh))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	lh->n_vocab = n_vocab;
	lh->d = d;
	lh->kernel = kernel;
	lh->blocks = (n_vocab + 15) / 16;
	lh->f16 = f16;
	lh->w = aligned_alloc(64, (size_t)lh->blocks * 16 * d / 2);
	lh->scale = calloc((size_t)lh->blocks * 16, sizeof(float));
	lh->mean = calloc(d, sizeof(float));
	/* + 1: a model without outlier channels still gets a pointer */
	if (lh->mean != NULL && channel_stats(lh) == 0)
		lh->out_w = calloc((size_t)lh->n_out * lh->blocks * 16 + 1,
		    sizeof(float));
	if (lh->w == NULL || lh->scale == NULL || lh->out_w == NULL) {
		logits_head_free(lh);
		return err_set(err, SOTTO_ENOMEM, "out of memory for the "
		    "4-bit output head");
	}
	memset(lh->w, ZERO | ZERO << 4, (size_t)lh->blocks * 16 * d / 2);
#pragma omp parallel for schedule(static)
	for (v = 0; v < n_vocab; v++)
		if (lh->kernel == LOGITS_AVX2)
			logits_avx2_quantize_row(lh, v);
		else
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
	free(lh->mean);
	free(lh->out_w);
	free(lh);
}

/*
 * Column j of x [d][n] (rows ldx apart) to int8 with a scale, zero on the
 * outlier channels, which go to xc->xo. With AMX laid out as B tiles,
 * xq[c][r][j][4] = x[KC c + 4 r + {0..3}][j]; for vpdpbusd column by
 * column, xq[j][k]. The other columns' bytes are left as they are.
 */
static void
quantize_col(const struct logits_head *lh, const float *x, int ldx, int j,
    int8_t *xq, struct xcols *xc)
{
	float max = 0.0f, inv, base = 0.0f;
	int32_t sum = 0;
	int d = lh->d, k, o;

	for (o = 0; o < lh->n_out; o++)
		xc->xo[o][j] = x[(size_t)lh->out_c[o] * ldx + j];
	for (k = 0; k < d; k++) {
		/* the outlier channels have mean 0: not in base */
		base += lh->mean[k] * x[(size_t)k * ldx + j];
		if (!is_outlier(lh, k))
			max = gemv_absmax(max, x[(size_t)k * ldx + j]);
	}
	xc->sx[j] = max / 127.0f;
	xc->base[j] = base;
	inv = max > 0.0f ? 127.0f / max : 0.0f;
	for (k = 0; k < d; k++) {
		int8_t q = is_outlier(lh, k) ? 0 : (int8_t)lrintf(
		    x[(size_t)k * ldx + j] * inv);

		if (lh->kernel == LOGITS_AMX)
			xq[((size_t)(k / KC) * 16 + (k % KC) / 4) * 64 + j * 4 +
			    k % 4] = q;
		else
			xq[(size_t)j * d + k] = q;
		sum += q;
	}
	xc->sum[j] = sum;
}

/* One tile of nibbles (16 rows of KC / 2 bytes) to bytes 0..15 in a. */
AMX_TARGET static inline void
widen_tile(const uint8_t *w, uint8_t *a)
{
	const __m512i lo4 = _mm512_set1_epi8(0x0f);
	int r;

	for (r = 0; r < 16; r += 2) {
		__m512i v = _mm512_loadu_si512(w + r * (KC / 2));
		__m512i lo = _mm512_and_si512(v, lo4);
		__m512i hi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);

		/* row r: lanes 0-1 of lo then of hi; row r + 1: lanes 2-3 */
		_mm512_store_si512(a + r * KC, _mm512_shuffle_i64x2(lo, hi,
		    0x44));
		_mm512_store_si512(a + (r + 1) * KC, _mm512_shuffle_i64x2(lo,
		    hi, 0xee));
	}
}

/* Estimates for blocks [b0, b1) into out[j][v] (rows n_vocab apart). */
AMX_TARGET static void
estimate(const struct logits_head *lh, const int8_t *xq,
    const struct xcols *xc, int n, float *out, int b0, int b1)
{
	int32_t acc[16][16];
	uint8_t a[16 * KC] __attribute__((aligned(64)));
	int kc = lh->d / KC, b, c, i, j, o;

	AMX_CONFIGURE(3);
	for (b = b0; b < b1; b++) {
		_tile_zero(T_C);
		for (c = 0; c < kc; c++) {
			const uint8_t *w = lh->w + ((size_t)b * kc + c) *
			    (16 * KC / 2);

			/* as gemv.c: the hardware prefetcher alone is slower */
			_mm_prefetch((const char *)w + 8192, _MM_HINT_T0);
			widen_tile(w, a);
			_tile_loadd(T_A, a, KC);
			_tile_loadd(T_B, xq + (size_t)c * 1024, 64);
			_tile_dpbusd(T_C, T_A, T_B);
		}
		_tile_stored(T_C, acc, 64);
		for (i = 0; i < 16 && b * 16 + i < lh->n_vocab; i++) {
			int v = b * 16 + i;
			float s = lh->scale[v];

			for (j = 0; j < n; j++) {
				float e = (float)(acc[i][j] - ZERO *
				    xc->sum[j]) * s * xc->sx[j] + xc->base[j];

				for (o = 0; o < lh->n_out; o++)
					e += lh->out_w[(size_t)o * lh->blocks *
					    16 + v] * xc->xo[o][j];
				out[(size_t)j * lh->n_vocab + v] = e;
			}
		}
	}
	_tile_release();
}

/*
 * VNNI: block b's sums over k of nibble x int8 for nc columns from j0,
 * the low and the high nibbles into separate accumulators (two chains
 * of dependent vpdpbusd instead of one).
 */
VNNI_TARGET static inline __attribute__((always_inline)) void
vnni_sums(const struct logits_head *lh, const int8_t *xq, int b, int j0,
    __m512i *acc, const int nc)
{
	const __m512i lo4 = _mm512_set1_epi8(0x0f);
	const __m512i *w = (const __m512i *)(lh->w + (size_t)b * lh->d * 8);
	__m512i lo[5], hi[5];
	int g, j;

	for (j = 0; j < nc; j++)
		lo[j] = hi[j] = _mm512_setzero_si512();
	for (g = 0; g < lh->d / 8; g++) {
		__m512i v = _mm512_load_si512(w + g);
		__m512i vl = _mm512_and_si512(v, lo4);
		__m512i vh = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);

		/* as gemv.c's dot path: ahead, and non-temporal */
		_mm_prefetch((const char *)(w + g) + 8192, _MM_HINT_NTA);
		for (j = 0; j < nc; j++) {
			const int32_t *x = (const int32_t *)(xq +
			    (size_t)(j0 + j) * lh->d) + 2 * g;

			lo[j] = _mm512_dpbusd_epi32(lo[j], vl,
			    _mm512_set1_epi32(x[0]));
			hi[j] = _mm512_dpbusd_epi32(hi[j], vh,
			    _mm512_set1_epi32(x[1]));
		}
	}
	for (j = 0; j < nc; j++)
		acc[j0 + j] = _mm512_add_epi32(lo[j], hi[j]);
}

/*
 * An instance per column count, so that the sums stay in registers; up
 * to 5 a pass, as logits-avx2.c takes them: a beam search's 5 went 4 and
 * then 1, splitting each block's nibbles twice, and the one column's
 * pass waited on its own two chains (base's 5-beam head 0.76 ms a step).
 */
#define VNNI_SUMS(N)							\
VNNI_TARGET static void							\
vnni_sums_##N(const struct logits_head *lh, const int8_t *xq, int b,	\
    int j0, __m512i *acc)						\
{									\
	vnni_sums(lh, xq, b, j0, acc, N);				\
}

VNNI_SUMS(1) VNNI_SUMS(2) VNNI_SUMS(3) VNNI_SUMS(4) VNNI_SUMS(5)

static void (*const vnni_sums_for[6])(const struct logits_head *,
    const int8_t *, int, int, __m512i *) = { NULL, vnni_sums_1,
	vnni_sums_2, vnni_sums_3, vnni_sums_4, vnni_sums_5 };

/* The same estimates as estimate(), by vpdpbusd on the VNNI layout. */
VNNI_TARGET static void
estimate_vnni(const struct logits_head *lh, const int8_t *xq,
    const struct xcols *xc, int n, float *out, int b0, int b1)
{
	__m512i acc[16];
	int b, j, o, nc;

	for (b = b0; b < b1; b++) {
		int v = b * 16;
		__mmask16 m = lanes16(v, lh->n_vocab);
		__m512 s = _mm512_maskz_loadu_ps(m, lh->scale + v);

		for (j = 0; j < n; j += nc) {
			nc = n - j < 5 ? n - j : 5;
			vnni_sums_for[nc](lh, xq, b, j, acc);
		}
		for (j = 0; j < n; j++) {
			__m512 e = _mm512_fmadd_ps(_mm512_mul_ps(
			    _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[j],
			    _mm512_set1_epi32(ZERO * xc->sum[j]))), s),
			    _mm512_set1_ps(xc->sx[j]),
			    _mm512_set1_ps(xc->base[j]));

			for (o = 0; o < lh->n_out; o++)
				e = _mm512_fmadd_ps(_mm512_loadu_ps(lh->out_w +
				    (size_t)o * lh->blocks * 16 + v),
				    _mm512_set1_ps(xc->xo[o][j]), e);
			_mm512_mask_storeu_ps(out + (size_t)j * lh->n_vocab +
			    v, m, e);
		}
	}
}

/*
 * Whether any of x[0..8) is not at most t (a NaN is not): nearly all of a
 * row is below the 64 largest seen so far, and this looks at 8 of them
 * at a time; SSE2 is in every x86-64.
 */
static inline int
any_above(const float *x, float t)
{
	__m128 tv = _mm_set1_ps(t);

	return _mm_movemask_ps(_mm_or_ps(_mm_cmpnle_ps(_mm_loadu_ps(x), tv),
	    _mm_cmpnle_ps(_mm_loadu_ps(x + 4), tv))) != 0;
}

void
logits_top(const float *row, int n, int *top)
{
	float val[LOGITS_EXACT];
	int i, k, end, min_at = 0;

	for (k = 0; k < LOGITS_EXACT; k++) {
		top[k] = k;
		val[k] = row[k];
		if (val[k] < val[min_at])
			min_at = k;
	}
	for (i = LOGITS_EXACT; i < n; i = end) {
		end = n - i < 8 ? n : i + 8;
		/* the same as the loop below would skip them one by one */
		if (end == i + 8 && !any_above(row + i, val[min_at]))
			continue;
		for (; i < end; i++) {
			if (row[i] <= val[min_at])
				continue;
			top[min_at] = i;
			val[min_at] = row[i];
			for (k = 0; k < LOGITS_EXACT; k++)
				if (val[k] < val[min_at])
					min_at = k;
		}
	}
}

/* f16 row v . col [d], in f32. */
AVX512_TARGET static float
exact_dot(const struct logits_head *lh, int v, const float *col)
{
	const uint16_t *row = lh->f16 + (size_t)v * lh->d;
	__m512 acc = _mm512_setzero_ps();
	int k;

	for (k = 0; k < lh->d; k += 16)
		acc = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256(
		    (const __m256i *)(row + k))), _mm512_loadu_ps(col + k),
		    acc);
	return _mm512_reduce_add_ps(acc);
}

/* Logit v exactly, from the column col [d]: by the head's kernel's ISA. */
static float
exact_logit(const struct logits_head *lh, int v, const float *col)
{
	if (lh->kernel == LOGITS_AVX2)
		return gemv_dot_f16_avx2(lh->f16 + (size_t)v * lh->d, col,
		    lh->d);
	return exact_dot(lh, v, col);
}

int
logits_head_run(const struct logits_head *lh, const float *x, int ldx,
    int n, float *out, int8_t *scratch, char *err)
{
	struct xcols xc;
	int j;

	if (n < 1 || n > 16 || lh->n_vocab < LOGITS_EXACT)
		return err_set(err, SOTTO_EINVAL, "4-bit output head: %d "
		    "columns", n);
	/*
	 * The columns are rounded inside the region, shared among the
	 * threads (gemv-i8-avx2.c says why); the AMX tiles' unused columns
	 * stay zero.
	 */
#pragma omp parallel
	{
		int t = omp_get_thread_num(), nt = omp_get_num_threads();
		int b0 = (int)((long long)lh->blocks * t / nt);
		int b1 = (int)((long long)lh->blocks * (t + 1) / nt);
		int c;

#pragma omp single
		memset(scratch, 0, LOGITS_SCRATCH(lh->d));
		for (c = t; c < n; c += nt)
			quantize_col(lh, x, ldx, c, scratch, &xc);
#pragma omp barrier

		if (lh->kernel == LOGITS_AMX)
			estimate(lh, scratch, &xc, n, out, b0, b1);
		else if (lh->kernel == LOGITS_VNNI)
			estimate_vnni(lh, scratch, &xc, n, out, b0, b1);
		else
			logits_avx2_estimate(lh, scratch, &xc, n, out, b0,
			    b1);
	}
	/* the columns (beams) apart: one thread slept through them all */
#pragma omp parallel for schedule(static) if (n > 1)
	for (j = 0; j < n; j++) {
		float *row = out + (size_t)j * lh->n_vocab, col[LOGITS_MAX_D];
		int top[LOGITS_EXACT], k;

		for (k = 0; k < lh->d; k++)
			col[k] = x[(size_t)k * ldx + j];
		logits_top(row, lh->n_vocab, top);
		for (k = 0; k < LOGITS_EXACT; k++)
			row[top[k]] = exact_logit(lh, top[k], col);
	}
	return 0;
}

void
logits_head_exact(const struct logits_head *lh, const float *x, int v0,
    int v1, float *out)
{
	int v;

	for (v = v0; v < v1; v++)
		out[v] = exact_logit(lh, v, x);
}

int
logits_head_vnni(void)
{
	return __builtin_cpu_supports("avx512vnni") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl");
}
