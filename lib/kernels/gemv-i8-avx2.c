/*
 * Precision int8's decoder products of a few columns on CPUs with AVX2,
 * FMA and F16C but no AVX-512 (gemv-i8.c needs AVX512-VNNI). A cached
 * step reads every decoder weight once and is bound by memory: the fp32
 * path reads the F16 rows (gemv-f16.c), 2 bytes a weight; this reads 1.
 *
 * Weights: each row rounded to int8 (signed) with one scale per row,
 * max |w| / 127, in gemv-i8.c's layout: a block of 32 rows stored k-quad
 * by k-quad, 128 bytes per 4 values of k (each row's 4 bytes in turn);
 * the rows are padded to a whole block with zeros (the output head's
 * vocabulary is no multiple of 32).
 *
 * Products: 16 bytes (4 rows x 4 k) are widened to 16-bit by vpmovsxbw
 * and multiplied by vpmaddwd against the column's 4 values of k as
 * 16-bit integers broadcast to every 64-bit lane: each dword lane holds
 * one row's sum over 2 of the 4 values, added to its neighbour at the
 * end. Why not vpmaddubsw (bytes by bytes, twice the products per
 * instruction): it takes one operand unsigned and saturates its int16
 * pair sums, so a column would keep 7 bits (or need two byte products
 * and a correction by the row sums); the step is bound by reading the
 * weights, not by these instructions.
 *
 * Columns: q = round(x / sx) with sx = max |x| / QX, QX as large as keeps
 * a lane's int32 sum of k / 2 products of 127 |q| from overflowing
 * (32767 for k up to 1032, 22017 for tiny's 1536, 6605 for large's
 * 5120): 12.7 to 15 bits, more than bf16's 8, so the error is mostly the
 * weights' rounding.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "gemm.h"
#include "gemv.h"
#include "logits.h"

_Static_assert(GEMV_I8_AVX2_EXACT == LOGITS_EXACT,
    "the rescoring takes the top logits_top() finds");

#define V3		__attribute__((target("avx2,f16c,fma")))
#define RB		32	/* rows per block, as gemv-i8.c */
#define KQ		4	/* k per quad */
#define PAR_MIN_ELEMS	(1u << 16)	/* as gemv.c */
#define PREFETCH_BYTES	8192	/* as gemv-i8.c */
/*
 * T0, not gemv.c's NTA: on the Xeon these were measured on (AVX2 forced,
 * one thread, bench/sotto-kernels) the head's shape, 51840 x 384, took a
 * median 2.16 ms with T0, 2.90 with NTA and 6.5 with no prefetch; the
 * small products were within noise (0.065-0.091 ms).
 */
#define WEIGHT_HINT	_MM_HINT_T0

/* Capped as oneDNN's ISA is by ONEDNN_MAX_CPU_ISA (gemv-f16.c). */
int
gemv_i8_avx2_supported(void)
{
	unsigned isa = gemm_cpu_isa();

	return (isa & dnnl_cpu_isa_avx2) == dnnl_cpu_isa_avx2 &&
	    __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
	    __builtin_cpu_supports("f16c");
}

int
gemv_i8_avx2_rows(int rows)
{
	return (rows + RB - 1) / RB * RB;
}

size_t
gemv_i8_avx2_bytes(int rows, int k)
{
	return (size_t)gemv_i8_avx2_rows(rows) * k;
}

/* Row m of F16 src [k] into wp and scale[m]. */
V3 static void
pack_row(const uint16_t *src, int k, uint8_t *wp, int m, float *scale)
{
	uint8_t *o = wp + (size_t)(m / RB) * RB * k + (m % RB) * KQ;
	__m256 mx = _mm256_setzero_ps(), inv;
	__m256 sign = _mm256_set1_ps(-0.0f);
	float lanes[8], max = 0.0f;
	int i, j;

	for (i = 0; i < k; i += 8)
		mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)(src + i)))));
	_mm256_storeu_ps(lanes, mx);
	for (j = 0; j < 8; j++)
		max = fmaxf(max, lanes[j]);
	scale[m] = max / 127.0f;
	inv = _mm256_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
	for (i = 0; i < k; i += 8) {
		/* |w| <= max: within -127 .. 127 */
		__m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_cvtph_ps(
		    _mm_loadu_si128((const __m128i *)(src + i))), inv));
		__m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(v),
		    _mm256_extracti128_si256(v, 1));
		int64_t q8;

		q8 = _mm_cvtsi128_si64(_mm_packs_epi16(w16, w16));
		memcpy(o + (size_t)i / KQ * RB * KQ, &q8, KQ);
		memcpy(o + (size_t)(i + KQ) / KQ * RB * KQ,
		    (const uint8_t *)&q8 + KQ, KQ);
	}
}

void
gemv_i8_avx2_pack(const uint16_t *f16, int rows, int k, int row0,
    uint8_t *wp, float *scale)
{
	int m;

#pragma omp parallel for schedule(static) if (rows >= 64)
	for (m = 0; m < rows; m++)
		pack_row(f16 + (size_t)m * k, k, wp, row0 + m, scale);
}

/* The largest |q| of a column for k (see the top of the file). */
static int
col_qmax(int k)
{
	long long q = 2147483647LL / (127LL * (k / 2 > 0 ? k / 2 : 1));

	return q > 32767 ? 32767 : (int)q;
}

/*
 * Column j0 + j of x as int16 xq[j][k] and its scale sx[j]: zeros past
 * the n columns there are (a pass's instance takes N >= n).
 */
static void
quantize_col(const float *x, int ldx, int k, int j0, int n, int j,
    int16_t *xq, float *sx)
{
	int qmax = col_qmax(k), kk;
	float max = 0.0f, inv;

	for (kk = 0; j < n && kk < k; kk++)
		max = gemv_absmax(max, x[(size_t)kk * ldx + j0 + j]);
	sx[j] = max / qmax;
	inv = max > 0.0f ? qmax / max : 0.0f;
	for (kk = 0; kk < k; kk++)
		xq[(size_t)j * k + kk] = j < n ? (int16_t)lrintf(
		    x[(size_t)kk * ldx + j0 + j] * inv) : 0;
}

/* y rows [row, row + 4) of column j (+)= v, those below a->rows. */
V3 static inline void
store4(const struct gemv_i8_args *a, __m128 v, int row, int j)
{
	float out[4];
	int i;

	if (a->ym == 1 && !a->accumulate && row + 4 <= a->rows) {
		_mm_storeu_ps(a->y + row + j * a->yj, v);
		return;
	}
	_mm_storeu_ps(out, v);
	for (i = 0; i < 4 && row + i < a->rows; i++) {
		float *o = a->y + (row + i) * a->ym + j * a->yj;

		*o = a->accumulate ? *o + out[i] : out[i];
	}
}

static inline int64_t
quad(const int16_t *x)
{
	int64_t v;

	memcpy(&v, x, 8);
	return v;
}

/* The 4 rows of sum s of group g of block b, column j, scaled into y. */
V3 static inline void
finish4(const struct gemv_i8_args *a, __m256i s, int b, int g, int j,
    float sxj)
{
	int row = b * RB + g * 4;
	/* lanes (r0 k01, r0 k23, r1 ...): add neighbours, rows 0-3 low */
	__m256i t = _mm256_hadd_epi32(s, s);
	__m128i sm = _mm256_castsi256_si128(_mm256_permute4x64_epi64(t,
	    0x08));

	store4(a, _mm_mul_ps(_mm_mul_ps(_mm_loadu_ps(a->scale + row),
	    _mm_set1_ps(sxj)), _mm_cvtepi32_ps(sm)), row, j);
}

/*
 * Blocks [b0, b1) against N columns: G groups of 4 rows at a time (8, all
 * of a block, for one column), G N accumulators; a group's 16 bytes are
 * widened once and multiplied by each column's quad, broadcast from L1.
 */
V3 static inline __attribute__((always_inline)) void
dot_i8(const struct gemv_i8_args *a, const int16_t *xq, const float *sx,
    int b0, int b1, const int N)
{
	const int G = N == 1 ? 8 : N == 2 ? 4 : N <= 4 ? 2 : 1;
	int nq = a->k / KQ, b, g0, q, g, j;

	for (b = b0; b < b1; b++) {
		const uint8_t *blk = a->wp + (size_t)b * RB * a->k;

		for (g0 = 0; g0 < RB / 4; g0 += G) {
			__m256i acc[10];	/* G * N <= 10 */

#pragma GCC unroll 10
			for (j = 0; j < G * N; j++)
				acc[j] = _mm256_setzero_si256();
			for (q = 0; q < nq; q++) {
				const uint8_t *w = blk + (size_t)q * RB * KQ +
				    g0 * 16;

				_mm_prefetch((const char *)w + PREFETCH_BYTES,
				    WEIGHT_HINT);
#pragma GCC unroll 8
				for (g = 0; g < G; g++) {
					__m256i wv = _mm256_cvtepi8_epi16(
					    _mm_load_si128((const __m128i *)
					    (w + g * 16)));

#pragma GCC unroll 8
					for (j = 0; j < N; j++)
						acc[g * N + j] =
						    _mm256_add_epi32(acc[g * N +
						    j], _mm256_madd_epi16(wv,
						    _mm256_set1_epi64x(quad(xq +
						    (size_t)j * a->k + q * KQ))));
				}
			}
#pragma GCC unroll 8
			for (g = 0; g < G; g++)
#pragma GCC unroll 8
				for (j = 0; j < N; j++)
					/* j < N, a constant, no early exit:
					 * acc stays in registers */
					if (j < a->n)
						finish4(a, acc[g * N + j], b,
						    g0 + g, j, sx[j]);
		}
	}
}

/*
 * dot_i8's ten sums of five columns (beam search's step; G 2) as named
 * variables: GCC kept four of dot_i8's array of sums in memory, a load
 * and a store each per product. The same integer sums, in the same
 * order.
 */
#define MADD(acc, w, x)	acc = _mm256_add_epi32(acc, _mm256_madd_epi16(w, x))
#define WIDEN(w, g)	_mm256_cvtepi8_epi16(_mm_load_si128(		\
			    (const __m128i *)((w) + (g) * 16)))
#define QUAD(xj, q)	_mm256_set1_epi64x(quad((xj) + (q) * KQ))

V3 static void
dot_i8_5(const struct gemv_i8_args *a, const int16_t *xq, const float *sx,
    int b0, int b1)
{
	const int16_t *x0 = xq, *x1 = x0 + a->k, *x2 = x1 + a->k,
	    *x3 = x2 + a->k, *x4 = x3 + a->k;
	int nq = a->k / KQ, b, g, q;

	for (b = b0; b < b1; b++) {
		const uint8_t *blk = a->wp + (size_t)b * RB * a->k;

		for (g = 0; g < RB / 4; g += 2) {
			__m256i s00 = _mm256_setzero_si256(), s01 = s00,
			    s02 = s00, s03 = s00, s04 = s00, s10 = s00,
			    s11 = s00, s12 = s00, s13 = s00, s14 = s00;

			for (q = 0; q < nq; q++) {
				const uint8_t *w = blk + (size_t)q * RB * KQ +
				    g * 16;
				__m256i w0 = WIDEN(w, 0), w1 = WIDEN(w, 1), xb;

				_mm_prefetch((const char *)w + PREFETCH_BYTES,
				    WEIGHT_HINT);
				xb = QUAD(x0, q);
				MADD(s00, w0, xb);
				MADD(s10, w1, xb);
				xb = QUAD(x1, q);
				MADD(s01, w0, xb);
				MADD(s11, w1, xb);
				xb = QUAD(x2, q);
				MADD(s02, w0, xb);
				MADD(s12, w1, xb);
				xb = QUAD(x3, q);
				MADD(s03, w0, xb);
				MADD(s13, w1, xb);
				xb = QUAD(x4, q);
				MADD(s04, w0, xb);
				MADD(s14, w1, xb);
			}
			{
				/* the columns past n are zeros; not stored */
				__m256i lo[5] = { s00, s01, s02, s03, s04 };
				__m256i hi[5] = { s10, s11, s12, s13, s14 };
				int j;

				for (j = 0; j < 5 && j < a->n; j++) {
					finish4(a, lo[j], b, g, j, sx[j]);
					finish4(a, hi[j], b, g + 1, j, sx[j]);
				}
			}
		}
	}
}

#define DOT_I8(N)							\
V3 static void								\
dot_i8_##N(const struct gemv_i8_args *a, const int16_t *xq,		\
    const float *sx, int b0, int b1)					\
{									\
	dot_i8(a, xq, sx, b0, b1, N);					\
}

DOT_I8(1) DOT_I8(2) DOT_I8(3) DOT_I8(4) DOT_I8(8)

typedef void (*dot_i8_fn)(const struct gemv_i8_args *, const int16_t *,
    const float *, int, int);

/* For n columns, the instance and the columns it computes. */
static const struct {
	dot_i8_fn fn;
	int width;
} dot_i8_for[GEMV_I8_COLS + 1] = { { NULL, 0 }, { dot_i8_1, 1 },
	{ dot_i8_2, 2 }, { dot_i8_3, 3 }, { dot_i8_4, 4 }, { dot_i8_5, 5 },
	{ dot_i8_8, 8 }, { dot_i8_8, 8 }, { dot_i8_8, 8 } };

void
gemv_i8_avx2(const struct gemv_i8_args *a, void *scratch)
{
	int16_t *xq = scratch;
	float sx[GEMV_I8_COLS];
	int blocks = gemv_i8_avx2_rows(a->rows) / RB, j0, nb, w;
	int par = (size_t)a->rows * a->k >= PAR_MIN_ELEMS;

	for (j0 = 0; j0 < a->n; j0 += GEMV_I8_COLS) {
		struct gemv_i8_args b = *a;

		nb = a->n - j0 < GEMV_I8_COLS ? a->n - j0 : GEMV_I8_COLS;
		w = dot_i8_for[nb].width;
		b.y = a->y + j0 * a->yj;
		b.n = nb;
		/*
		 * The columns are rounded inside the region, shared among
		 * the threads: rounded before it, they were most of the
		 * serial time between a step's regions (7-9 us before each
		 * of base's 30 a 5-beam step, AVX2), and a thread that slept
		 * through that gap is woken while it is done.
		 */
#pragma omp parallel if (par)
		{
			int t = omp_get_thread_num();
			int nt = omp_get_num_threads();
			int b0 = (int)((long long)blocks * t / nt);
			int b1 = (int)((long long)blocks * (t + 1) / nt);
			int j;

			for (j = t; j < w; j += nt)
				quantize_col(a->x, a->ldx, a->k, j0, nb, j, xq,
				    sx);
#pragma omp barrier
			if (b0 < b1)
				dot_i8_for[nb].fn(&b, xq, sx, b0, b1);
		}
	}
}

void
gemv_i8_avx2_rescore(const uint16_t *f16, int rows, int k, const float *x,
    int ldx, int n, float *y, ptrdiff_t yj, void *scratch)
{
	float *cols = scratch;
	int j;

	if (rows < GEMV_I8_AVX2_EXACT)
		return;
	/* the columns (beams) apart: the other thread slept through it */
#pragma omp parallel for schedule(static) if (n > 1)
	for (j = 0; j < n; j++) {
		float *row = y + j * yj, *col = cols + (size_t)j * k;
		int top[GEMV_I8_AVX2_EXACT], kk, t;

		for (kk = 0; kk < k; kk++)
			col[kk] = x[(size_t)kk * ldx + j];
		logits_top(row, rows, top);
		for (t = 0; t < GEMV_I8_AVX2_EXACT; t++)
			row[top[t]] = gemv_dot_f16_avx2(f16 + (size_t)top[t] * k, col, k);
	}
}
