/*
 * Decoder products of a few columns from int8 weights (precision int8;
 * the weights' layout is also gemm-i8.c's, for the encoder),
 * by AVX512-VNNI dot products (vpdpbusd): a cached step reads every
 * decoder weight once, and half the bytes of bf16 take about half the
 * time on a machine whose step is bound by memory.
 *
 * Weights: each row rounded to int8 with one scale per row (max |w| /
 * 127), stored as q + 128 (an unsigned byte, as vpdpbusd takes its first
 * operand). A block of 32 rows is stored k-quad by k-quad: 128 bytes per
 * 4 values of k, a vector per 16 rows (row-major 4 bytes each), so a
 * product streams it front to back and every vpdpbusd takes a vector of
 * 16 rows against the 4 values of a column broadcast to each lane: the
 * accumulators are 16 rows' results, with no sums across lanes (a first
 * form that dotted rows with columns and summed lanes at the end ran
 * 5 columns in 0.6 ms where oneDNN took 0.4; this form is oneDNN's).
 *
 * Columns: each column x is rounded to 16 bits, q = round(x / sx) with
 * sx = max |x| / 32639, and split q = 256 h + l with h and l signed
 * bytes; two vpdpbusd per weight vector give H = sum (w + 128) h and
 * L = sum (w + 128) l in int32 (no overflow: |H|, |L| <= 255 * 128 * k,
 * under 2^31 for k up to 65535), and
 *
 *   y = sw sx (256 H + L - 128 sum q)
 *
 * So the columns keep about 15 bits (more than bf16's 8), and the error
 * is the weights' rounding alone.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>

#include "gemm.h"
#include "gemv.h"

#define VNNI_TARGET	__attribute__((target( \
	"avx512f,avx512bw,avx512vl,avx512vnni,avx512bf16,f16c,fma")))
#define RB		32	/* rows per block */
#define KQ		4	/* k per lane */
#define QX		32639	/* |q| of a column: h = (q + 128) >> 8 fits */
#define PAR_MIN_ELEMS	(1u << 16)	/* as gemv.c */
#ifndef PREFETCH_BYTES
#define PREFETCH_BYTES	8192
#endif

/*
 * The weights are prefetched non-temporal on AMD, as gemv.c's dot path
 * (measured on Zen 4), and into every cache level (T0) on Intel: on a
 * Xeon with AMX (2026-11-29, base, --precision int8, 2 threads, three
 * alternating runs of sotto-bench) a greedy step took 4.6-4.9 ms with
 * NTA against 2.2-2.5 with T0, and a 5-beam step 6.8 against 5.4.
 */

/* The CPU's, capped as oneDNN's is by ONEDNN_MAX_CPU_ISA (gemv-f16.c). */
int
gemv_i8_supported(void)
{
	unsigned isa = gemm_cpu_isa();

	return (isa & dnnl_cpu_isa_avx512_core_bf16) ==
	    dnnl_cpu_isa_avx512_core_bf16 &&
	    __builtin_cpu_supports("avx512vnni") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") &&
	    __builtin_cpu_supports("avx512bf16");
}

size_t
gemv_i8_bytes(int rows, int k)
{
	return (size_t)rows * k;
}

VNNI_TARGET static void
pack_row(const uint16_t *src, int k, uint8_t *wp, int m, float *scale,
    int32_t *rowsum)
{
	__m512i sum = _mm512_setzero_si512();
	__m512i off = _mm512_set1_epi32(rowsum != NULL ? 0 : 128);
	uint8_t *o = wp + (size_t)(m / RB) * RB * k + (m % RB) * KQ;
	__m512 mx = _mm512_setzero_ps(), inv;
	float max;
	int i, j;

	for (i = 0; i < k; i += 16)
		mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(src + i)))));
	max = _mm512_reduce_max_ps(mx);
	scale[m] = max / 127.0f;
	inv = _mm512_set1_ps(max > 0.0f ? 127.0f / max : 0.0f);
	for (i = 0; i < k; i += 16) {
		/* |w| <= max: within -127 .. 127 */
		__m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_cvtph_ps(
		    _mm256_loadu_si256((const __m256i *)(src + i))), inv));
		uint8_t q[16];

		sum = _mm512_add_epi32(sum, v);
		_mm_storeu_si128((__m128i *)q, _mm512_cvtepi32_epi8(
		    _mm512_add_epi32(v, off)));
		for (j = 0; j < 16; j += KQ)	/* the quad's 4 bytes */
			memcpy(o + (size_t)(i + j) / KQ * RB * KQ, q + j, KQ);
	}
	if (rowsum != NULL)
		rowsum[m] = _mm512_reduce_add_epi32(sum);
}

void
gemv_i8_pack(const uint16_t *f16, int rows, int k, int row0, uint8_t *wp,
    float *scale, int32_t *rowsum)
{
	int m;

#pragma omp parallel for schedule(static) if (rows >= 64)
	for (m = 0; m < rows; m++)
		pack_row(f16 + (size_t)m * k, k, wp, row0 + m, scale, rowsum);
}

/*
 * Rows [m, m + 16) of wp as bf16 in gemv_pack's layout (16 rows x 32 k
 * per tile): each row's 32 k are 8 of its quads, a gather of dwords
 * 128 bytes apart.
 */
VNNI_TARGET static void
unpack16(const uint8_t *wp, const float *scale, int k, int m, uint16_t *out)
{
	const uint8_t *blk = wp + (size_t)(m / RB) * RB * k + (m % RB) * KQ;
	__m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5,
	    6, 7), _mm256_set1_epi32(RB * KQ));
	int i, c;

	for (i = 0; i < 16; i++) {
		__m512 sw = _mm512_set1_ps(scale[m + i]);

		for (c = 0; c < k / 32; c++) {
			__m256i q = _mm256_i32gather_epi32((const int *)(blk +
			    i * KQ + (size_t)c * 8 * RB * KQ), idx, 1);
			__m512i lo = _mm512_cvtepu8_epi32(
			    _mm256_castsi256_si128(q));
			__m512i hi = _mm512_cvtepu8_epi32(
			    _mm256_extracti128_si256(q, 1));
			__m512i off = _mm512_set1_epi32(128);
			__m512 a = _mm512_mul_ps(sw, _mm512_cvtepi32_ps(
			    _mm512_sub_epi32(lo, off)));
			__m512 b = _mm512_mul_ps(sw, _mm512_cvtepi32_ps(
			    _mm512_sub_epi32(hi, off)));

			_mm512_storeu_si512(out + (((size_t)(m / 16) * (k /
			    32) + c) * 16 + i) * 32, (__m512i)
			    _mm512_cvtne2ps_pbh(b, a));
		}
	}
}

void
gemv_i8_unpack(const uint8_t *wp, const float *scale, int rows, int k,
    uint16_t *out)
{
	int m;

#pragma omp parallel for schedule(static)
	for (m = 0; m < rows; m += 16)
		unpack16(wp, scale, k, m, out);
}

/*
 * Column j0 + j of x as xh, xl[j][k] (zeros past the n columns there
 * are), with its scale and its sum of q.
 */
static void
quantize_col(const float *x, int ldx, int k, int j0, int n, int j,
    int8_t *xh, int8_t *xl, float *sx, int32_t *sumq)
{
	float max = 0.0f, inv;
	int32_t s = 0;
	int kk;

	for (kk = 0; j < n && kk < k; kk++)
		max = gemv_absmax(max, x[(size_t)kk * ldx + j0 + j]);
	sx[j] = max / QX;
	inv = max > 0.0f ? QX / max : 0.0f;
	for (kk = 0; kk < k; kk++) {
		int q = j < n ? (int)lrintf(x[(size_t)kk * ldx + j0 + j] *
		    inv) : 0;
		int h = (q + 128) >> 8;

		xh[(size_t)j * k + kk] = (int8_t)h;
		xl[(size_t)j * k + kk] = (int8_t)(q - 256 * h);
		s += q;
	}
	sumq[j] = s;
}

/*
 * acc + the dword sums of u8 a x s8 b (vpdpbusd). In asm: GCC 12 copies
 * the accumulator of _mm512_dpbusd_epi32 to another register and back
 * at every use, and with 20 of them spilled some to the stack in the
 * inner loop (5 columns took 0.62 ms where oneDNN took 0.42).
 */
VNNI_TARGET static inline __m512i
dpbusd(__m512i acc, __m512i a, __m512i b)
{
	__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
	return acc;
}

/* The same with b the dword at p broadcast (folded into the product). */
VNNI_TARGET static inline __m512i
dpbusd_bcast(__m512i acc, __m512i a, const int8_t *p)
{
	__asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a),
	    "m"(*(const int32_t *)p));
	return acc;
}

/* y rows [row, row + 16) of column j (+)= v. */
VNNI_TARGET static inline void
store16(const struct gemv_i8_args *a, __m512 v, int row, int j)
{
	float out[16];
	int i;

	if (a->ym == 1 && !a->accumulate) {
		_mm512_storeu_ps(a->y + row + j * a->yj, v);
		return;
	}
	_mm512_storeu_ps(out, v);
	for (i = 0; i < 16; i++) {
		float *o = a->y + (row + i) * a->ym + j * a->yj;

		*o = a->accumulate ? *o + out[i] : out[i];
	}
}

/*
 * Blocks [b0, b1) against N columns: G vectors of 16 rows at a time (all
 * 4 of a block for few columns), 2 G N accumulators in registers; the
 * columns' quads are broadcast from L1.
 */
VNNI_TARGET static inline __attribute__((always_inline)) void
dot_i8(const struct gemv_i8_args *a, const int8_t *xh, const int8_t *xl,
    const float *sx, const int32_t *sumq, int b0, int b1, const int N)
{
	const int G = N <= 5 ? 2 : 1;
	const int weight_t0 = __builtin_cpu_is("intel");
	int nq = a->k / KQ, b, g0, q, g, j;

	for (b = b0; b < b1; b++) {
		const uint8_t *blk = a->wp + (size_t)b * RB * a->k;

		for (g0 = 0; g0 < RB / 16; g0 += G) {
			__m512i h[10], l[10];	/* G * N <= 10 */

#pragma GCC unroll 10
			for (j = 0; j < G * N; j++)
				h[j] = l[j] = _mm512_setzero_si512();
			for (q = 0; q < nq; q++) {
				const uint8_t *w = blk + (size_t)q * RB * KQ +
				    g0 * 64;
				__m512i wv[2];

				if (weight_t0)
					_mm_prefetch((const char *)w +
					    PREFETCH_BYTES, _MM_HINT_T0);
				else
					_mm_prefetch((const char *)w +
					    PREFETCH_BYTES, _MM_HINT_NTA);
#pragma GCC unroll 2
				for (g = 0; g < G; g++)
					wv[g] = _mm512_load_si512(w + g * 64);
#pragma GCC unroll 8
				for (j = 0; j < N; j++) {
					const int8_t *ph = xh + (size_t)j *
					    a->k + q * KQ;
					const int8_t *pl = xl + (size_t)j *
					    a->k + q * KQ;

#pragma GCC unroll 2
					for (g = 0; g < G; g++) {
						h[g * N + j] = dpbusd_bcast(
						    h[g * N + j], wv[g], ph);
						l[g * N + j] = dpbusd_bcast(
						    l[g * N + j], wv[g], pl);
					}
				}
			}
#pragma GCC unroll 2
			for (g = 0; g < G; g++) {
				int row = b * RB + (g0 + g) * 16;
				__m512 sw = _mm512_loadu_ps(a->scale + row);

#pragma GCC unroll 8
				for (j = 0; j < N; j++) {
					/* j < N, a constant, and no early
					 * exit: h and l stay in registers */
					__m512 v = _mm512_fmadd_ps(
					    _mm512_set1_ps(256.0f),
					    _mm512_cvtepi32_ps(h[g * N + j]),
					    _mm512_cvtepi32_ps(l[g * N + j]));

					v = _mm512_mul_ps(_mm512_mul_ps(sw,
					    _mm512_set1_ps(sx[j])), _mm512_sub_ps(
					    v, _mm512_set1_ps(128.0f *
					    (float)sumq[j])));
					if (j < a->n)
						store16(a, v, row, j);
				}
			}
		}
	}
}

#define DOT_I8(N)							\
VNNI_TARGET static void							\
dot_i8_##N(const struct gemv_i8_args *a, const int8_t *xh,		\
    const int8_t *xl, const float *sx, const int32_t *sumq, int b0,	\
    int b1)								\
{									\
	dot_i8(a, xh, xl, sx, sumq, b0, b1, N);				\
}

DOT_I8(1) DOT_I8(2) DOT_I8(3) DOT_I8(4) DOT_I8(5) DOT_I8(8)

typedef void (*dot_i8_fn)(const struct gemv_i8_args *, const int8_t *,
    const int8_t *, const float *, const int32_t *, int, int);

/* For n columns, the instance and the columns it computes. */
static const struct {
	dot_i8_fn fn;
	int width;
} dot_i8_for[GEMV_I8_COLS + 1] = { { NULL, 0 }, { dot_i8_1, 1 },
	{ dot_i8_2, 2 }, { dot_i8_3, 3 }, { dot_i8_4, 4 }, { dot_i8_5, 5 },
	{ dot_i8_8, 8 }, { dot_i8_8, 8 }, { dot_i8_8, 8 } };

void
gemv_i8(const struct gemv_i8_args *a, void *scratch)
{
	int8_t *xh = scratch, *xl = xh + (size_t)GEMV_I8_COLS * a->k;
	float sx[GEMV_I8_COLS];
	int32_t sumq[GEMV_I8_COLS];
	int blocks = a->rows / RB, j0, nb, w;
	int par = (size_t)a->rows * a->k >= PAR_MIN_ELEMS;

	for (j0 = 0; j0 < a->n; j0 += GEMV_I8_COLS) {
		struct gemv_i8_args b = *a;

		nb = a->n - j0 < GEMV_I8_COLS ? a->n - j0 : GEMV_I8_COLS;
		w = dot_i8_for[nb].width;
		b.y = a->y + j0 * a->yj;
		b.n = nb;
		/* the columns rounded inside the region (gemv-i8-avx2.c) */
#pragma omp parallel if (par)
		{
			int t = omp_get_thread_num();
			int nt = omp_get_num_threads();
			int b0 = (int)((long long)blocks * t / nt);
			int b1 = (int)((long long)blocks * (t + 1) / nt);
			int j;

			for (j = t; j < w; j += nt)
				quantize_col(a->x, a->ldx, a->k, j0, nb, j, xh,
				    xl, sx, sumq);
#pragma omp barrier
			if (b0 < b1)
				dot_i8_for[nb].fn(&b, xh, xl, sx, sumq, b0,
				    b1);
		}
	}
}
