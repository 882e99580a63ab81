/*
 * The 4-bit output head (logits.c) on CPUs with AVX2, FMA and F16C but no
 * AVX-512: precision int8's head there. The same nibbles in the VNNI
 * layout, the same estimates' formula and the same exact top; only the
 * products differ.
 *
 * Why: the int8 head this replaces (gemv-i8-avx2.c's products, 1 byte a
 * weight) was most of a step: 20 MB of tiny.en's 28 MB a token, and for
 * 5 beams its vpmaddwd products (16 products an instruction) made the
 * step bound by arithmetic rather than by memory. Here a weight is half
 * a byte, and vpmaddubsw makes 32 products an instruction (nibble 0..15
 * by the int8 column) into 16-bit sums, which take four groups of 8
 * values of k before they are widened to 32 bits (4 x 2 x 2 x 15 x 127 =
 * 30480, below 32767: no saturation, no overflow).
 */
#include <immintrin.h>
#include <string.h>

#include "gemv.h"
#include "logits-private.h"

#define V3	__attribute__((target("avx2,fma,f16c")))
#define FLUSH	4	/* groups of 8 k summed in 16 bits (above) */
#define PREFETCH_BYTES	8192	/* as gemv-i8-avx2.c, and its T0 hint */

V3 void
logits_avx2_row_sums(const struct logits_head *lh, int v0, int v1, float *s,
    float *q)
{
	int v, k;

	for (v = v0; v < v1; v++)
		for (k = 0; k < lh->d; k += 8) {
			__m256 e = _mm256_cvtph_ps(_mm_loadu_si128(
			    (const __m128i *)(lh->f16 + (size_t)v * lh->d + k)));

			_mm256_storeu_ps(s + k, _mm256_add_ps(
			    _mm256_loadu_ps(s + k), e));
			_mm256_storeu_ps(q + k, _mm256_fmadd_ps(e, e,
			    _mm256_loadu_ps(q + k)));
		}
}

/* logits.c's quantize_row for the VNNI layout: the same nibbles. */
V3 void
logits_avx2_quantize_row(struct logits_head *lh, int v)
{
	const uint16_t *row = lh->f16 + (size_t)v * lh->d;
	uint8_t *block = lh->w + (size_t)(v / 16) * lh->d * 8;
	float c[LOGITS_MAX_D], lanes[8], max = 0.0f;
	int32_t q[LOGITS_MAX_D];
	__m256 mx = _mm256_setzero_ps(), sign = _mm256_set1_ps(-0.0f), inv;
	int k, i;

	for (k = 0; k < lh->d; k += 8)
		_mm256_storeu_ps(c + k, _mm256_sub_ps(_mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)(row + k))),
		    _mm256_loadu_ps(lh->mean + k)));
	for (i = 0; i < lh->n_out; i++) {
		lh->out_w[(size_t)i * lh->blocks * 16 + v] = c[lh->out_c[i]];
		c[lh->out_c[i]] = 0.0f;
	}
	for (k = 0; k < lh->d; k += 8)
		mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign,
		    _mm256_loadu_ps(c + k)));
	_mm256_storeu_ps(lanes, mx);
	for (i = 0; i < 8; i++)
		max = lanes[i] > max ? lanes[i] : max;
	lh->scale[v] = max / QMAX;
	inv = _mm256_set1_ps(max > 0.0f ? QMAX / max : 0.0f);
	/* |c| <= max: within -QMAX .. QMAX */
	for (k = 0; k < lh->d; k += 8)
		_mm256_storeu_si256((__m256i *)(q + k), _mm256_cvtps_epi32(
		    _mm256_mul_ps(_mm256_loadu_ps(c + k), inv)));
	for (k = 0; k < lh->d; k += 8) {
		uint8_t *o = block + ((size_t)k / 8 * 16 + v % 16) * 4;

		for (i = 0; i < 4; i++)
			o[i] = (uint8_t)((q[k + i] + ZERO) |
			    (q[k + 4 + i] + ZERO) << 4);
	}
}

/*
 * Half h of block b (its rows 8 h .. 8 h + 7): the sums over k of nibble
 * x int8 for nc columns from j0 into acc[j][h]. A half at a time, so that
 * the nibbles are widened once for up to five columns with every sum in
 * a register (a whole block for two columns spilled its sums: 16
 * registers hold no more).
 */
V3 static inline __attribute__((always_inline)) void
sums(const struct logits_head *lh, const int8_t *xq, int b, int h, int j0,
    __m256i (*acc)[2], const int nc)
{
	const __m256i lo4 = _mm256_set1_epi8(0x0f);
	const __m256i *w = (const __m256i *)(lh->w + (size_t)b * lh->d * 8) +
	    h;
	const int32_t *x = (const int32_t *)(xq + (size_t)j0 * lh->d);
	__m256i s32[5], s16[5];
	int groups = lh->d / 8, g0, g, j;

	for (j = 0; j < nc; j++)
		s32[j] = _mm256_setzero_si256();
	for (g0 = 0; g0 < groups; g0 += FLUSH) {
		for (j = 0; j < nc; j++)
			s16[j] = _mm256_setzero_si256();
		/* not unrolled: GCC then loaded every column's values of
		 * the four groups first, and spilled them */
#pragma GCC unroll 1
		for (g = g0; g < g0 + FLUSH; g++) {
			__m256i v = _mm256_load_si256(w + 2 * g);
			__m256i lo = _mm256_and_si256(v, lo4);
			__m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4),
			    lo4);

			_mm_prefetch((const char *)(w + 2 * g) +
			    PREFETCH_BYTES, _MM_HINT_T0);
#pragma GCC unroll 5
			for (j = 0; j < nc; j++)
				s16[j] = _mm256_add_epi16(s16[j],
				    _mm256_add_epi16(_mm256_maddubs_epi16(lo,
				    _mm256_set1_epi32(x[(size_t)j * lh->d / 4 +
				    2 * g])), _mm256_maddubs_epi16(hi,
				    _mm256_set1_epi32(x[(size_t)j * lh->d / 4 +
				    2 * g + 1]))));
		}
#pragma GCC unroll 5
		for (j = 0; j < nc; j++)
			s32[j] = _mm256_add_epi32(s32[j], _mm256_madd_epi16(
			    s16[j], _mm256_set1_epi16(1)));
	}
	for (j = 0; j < nc; j++)
		acc[j0 + j][h] = s32[j];
}

#define SUMS(N)								\
V3 static void								\
sums_##N(const struct logits_head *lh, const int8_t *xq, int b, int h,	\
    int j0, __m256i (*acc)[2])						\
{									\
	sums(lh, xq, b, h, j0, acc, N);					\
}

SUMS(1) SUMS(2) SUMS(3) SUMS(4) SUMS(5)

typedef void (*sums_fn)(const struct logits_head *, const int8_t *, int,
    int, int, __m256i (*)[2]);

static const sums_fn sums_for[6] = { NULL, sums_1, sums_2, sums_3, sums_4,
	sums_5 };

/* logits.c's estimate_vnni, by vpmaddubsw: 8 rows a vector. */
V3 void
logits_avx2_estimate(const struct logits_head *lh, const int8_t *xq,
    const struct xcols *xc, int n, float *out, int b0, int b1)
{
	__m256i acc[16][2];
	float e8[8];
	int b, j, h, o, i, nc;

	for (b = b0; b < b1; b++) {
		for (h = 0; h < 2; h++)
			for (j = 0; j < n; j += nc) {
				nc = n - j < 5 ? n - j : 5;
				sums_for[nc](lh, xq, b, h, j, acc);
			}
		for (j = 0; j < n; j++)
			for (h = 0; h < 2; h++) {
				int v = b * 16 + h * 8;
				float *dst = out + (size_t)j * lh->n_vocab + v;
				__m256 e;

				if (v >= lh->n_vocab)
					break;
				e = _mm256_fmadd_ps(_mm256_mul_ps(
				    _mm256_cvtepi32_ps(_mm256_sub_epi32(
				    acc[j][h], _mm256_set1_epi32(ZERO *
				    xc->sum[j]))), _mm256_loadu_ps(lh->scale +
				    v)), _mm256_set1_ps(xc->sx[j]),
				    _mm256_set1_ps(xc->base[j]));
				for (o = 0; o < lh->n_out; o++)
					e = _mm256_fmadd_ps(_mm256_loadu_ps(
					    lh->out_w + (size_t)o * lh->blocks *
					    16 + v), _mm256_set1_ps(
					    xc->xo[o][j]), e);
				if (v + 8 <= lh->n_vocab) {
					_mm256_storeu_ps(dst, e);
					continue;
				}
				_mm256_storeu_ps(e8, e);
				for (i = 0; v + i < lh->n_vocab; i++)
					dst[i] = e8[i];
			}
	}
}
