/*
 * Decoder products: bf16 weights against a few columns (a cached step: one
 * column per beam) or a prompt's worth (prefill), at memory speed.
 *
 * Why not oneDNN here: for 1-8 columns its matmul ran tiny's vocabulary
 * projection (51864x384, 40 MB of bf16) in 7 ms, about twice the time it
 * takes to stream 40 MB from memory on these machines, and such products
 * are most of a decoder step. The weights are packed once at load into
 * blocks of 16 rows x 32 k (1 KB, exactly one AMX tile), so the products
 * read them as one sequential stream:
 *
 * - with AMX, each block is one tile product against 16 columns;
 * - with AVX512-BF16 only, each row is dotted with up to 8 columns by
 *   vdpbf16ps.
 *
 * Both accumulate in f32 over bf16 inputs, the arithmetic of the bf16 matmul.
 */
#include <immintrin.h>
#include <omp.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "amx.h"
#include "gemv.h"

#define ARCH_REQ_XCOMP_PERM	0x1023
#define XFEATURE_XTILEDATA	18

#define AMX_TARGET	AMX_TARGET_BF16
#define DOT_COLS	8	/* columns per pass of the dot-product path */
/*
 * Weights before a product uses all threads: tiny's smallest decoder
 * products (384 x 384, 0.3 MB) are split too. Inside `sotto transcribe`
 * (long-form file, greedy) a step took 6.3 ms on average against 7.3
 * with only products of 1M weights and more split, which left every
 * product of tiny's decoder layers on one thread.
 */
#define PAR_MIN_ELEMS	(1u << 16)
/*
 * How far ahead of the tile loads to prefetch the weight stream: the
 * hardware prefetcher alone left the vocabulary projection at 6.3-7.0
 * ms, 16 KB ahead it took 5.4 (tiny, 40 MB, alternating runs).
 */
#define PREFETCH_BYTES	16384
/*
 * The dot-product path prefetches its weights as non-temporal: a step
 * reads each weight once, and with T0 a greedy step took a median 2.02
 * ms (tiny.en) and 4.48 (base) against 1.79 and 4.06 with NTA (Zen 4,
 * 10 and 5 alternating runs of 150-200 steps); the weights then seem to
 * leave more of the cache to what a step reads again, the cross-attention
 * K/V and the self-attention caches.
 */
#define WEIGHT_HINT	_MM_HINT_NTA

size_t
gemv_packed_elems(int rows, int k)
{
	return (size_t)(rows + 15) / 16 * 16 * ((k + 31) / 32 * 32);
}

void
gemv_pack(const uint16_t *w, int rows, int k, uint16_t *out)
{
	int kc = (k + 31) / 32, mb, c, i;

	for (mb = 0; mb < (rows + 15) / 16; mb++)
		for (c = 0; c < kc; c++)
			for (i = 0; i < 16; i++) {
				uint16_t *o = out + (((size_t)mb * kc + c) *
				    16 + i) * 32;
				int m = mb * 16 + i, n = k - 32 * c;

				n = n > 32 ? 32 : n;
				memset(o, 0, 64);
				if (m < rows)
					memcpy(o, w + (size_t)m * k + 32 * c,
					    (size_t)n * 2);
			}
}

/* Row m's 32 values of chunk c in the packed layout. */
static inline const uint16_t *
packed_at(const uint16_t *wp, int k, int m, int c)
{
	return wp + (((size_t)(m / 16) * (k / 32) + c) * 16 + m % 16) * 32;
}

static inline void
store(float *o, float v, int accumulate)
{
	*o = accumulate ? *o + v : v;
}

/* Lane i of the result is the sum of the lanes of v[i]. */
BF16_TARGET static inline __m512
hadd16(const __m512 *v)
{
	__m512 s1[8], s2[4], t01, t23;
	int i;

	/* per 128-bit lane: (a0 + a2, b0 + b2, a1 + a3, b1 + b3) */
	for (i = 0; i < 8; i++)
		s1[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i],
		    v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
	/* element 4L + t: the sum of 128-bit lane L of v[4q + t] */
	for (i = 0; i < 4; i++)
		s2[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(
		    _mm512_castps_pd(s1[2 * i]), _mm512_castps_pd(s1[2 * i +
		    1]))), _mm512_castpd_ps(_mm512_unpackhi_pd(
		    _mm512_castps_pd(s1[2 * i]), _mm512_castps_pd(s1[2 * i +
		    1]))));
	/* then across the four 128-bit lanes */
	t01 = _mm512_add_ps(_mm512_shuffle_f32x4(s2[0], s2[1], 0x88),
	    _mm512_shuffle_f32x4(s2[0], s2[1], 0xdd));
	t23 = _mm512_add_ps(_mm512_shuffle_f32x4(s2[2], s2[3], 0x88),
	    _mm512_shuffle_f32x4(s2[2], s2[3], 0xdd));
	return _mm512_add_ps(_mm512_shuffle_f32x4(t01, t23, 0x88),
	    _mm512_shuffle_f32x4(t01, t23, 0xdd));
}

/*
 * Dot-product path: rows [m0, m1) (m0 a multiple of 16) against columns
 * [j0, j0 + N) of xt (bf16 rows of k), n of which are real. A block of
 * 16 rows goes R = 16 / N rows at a time, up to 16 accumulators, reduced
 * together at the end (hadd16); for one column (a greedy step) that reads
 * each block front to back. Why: a row at a time read 64 bytes of every
 * KB of the block (its place in each 16 x 32 tile) and reduced each
 * accumulator on its own; base's greedy step took 5.5 ms, of which these
 * products were about 40%. N is a constant in each caller so the
 * accumulators stay in registers.
 */
BF16_TARGET static inline __attribute__((always_inline)) void
dot_rows(const uint16_t *wp, int k, const uint16_t *xt, int n, float *y,
    ptrdiff_t ym, ptrdiff_t yj, int accumulate, int m0, int m1, const int N)
{
	const int R = 16 / N;
	int kc = k / 32, mb, r0, c, r, j, nr;

	for (mb = m0; mb < m1; mb += 16) {
		const uint16_t *blk = wp + (size_t)(mb / 16) * kc * 512;

		for (r0 = 0; r0 < 16 && mb + r0 < m1; r0 += R) {
			__m512 a[16];
			float out[16];

			for (j = 0; j < 16; j++)
				a[j] = _mm512_setzero_ps();
			/* 16 is not a multiple of R for N = 3, 5 */
			nr = 16 - r0 < R ? 16 - r0 : R;
			for (c = 0; c < kc; c++) {
				const uint16_t *w = blk + ((size_t)c * 16 +
				    r0) * 32;
				__m512bh xv[8];

				for (j = 0; j < N; j++)
					xv[j] = (__m512bh)_mm512_loadu_si512(
					    xt + (size_t)j * k + 32 * c);
				for (r = 0; r < nr; r++) {
					__m512bh wv = (__m512bh)
					    _mm512_load_si512(w + r * 32);

					_mm_prefetch((const char *)(w + r * 32) +
					    PREFETCH_BYTES, WEIGHT_HINT);
					for (j = 0; j < N; j++)
						a[r * N + j] = _mm512_dpbf16_ps(
						    a[r * N + j], wv, xv[j]);
				}
			}
			_mm512_storeu_ps(out, hadd16(a));
			for (r = 0; r < nr && mb + r0 + r < m1; r++)
				for (j = 0; j < N && j < n; j++)
					store(y + (mb + r0 + r) * ym + j * yj,
					    out[r * N + j], accumulate);
		}
	}
}

/* An instance per width, so the accumulators stay in registers. */
#define DOT_ROWS(N)							\
BF16_TARGET static void							\
dot_rows_##N(const uint16_t *wp, int k, const uint16_t *xt, int n,	\
    float *y, ptrdiff_t ym, ptrdiff_t yj, int acc, int m0, int m1)	\
{									\
	dot_rows(wp, k, xt, n, y, ym, yj, acc, m0, m1, N);		\
}

DOT_ROWS(1) DOT_ROWS(2) DOT_ROWS(3) DOT_ROWS(4) DOT_ROWS(5) DOT_ROWS(8)

typedef void (*dot_fn)(const uint16_t *, int, const uint16_t *, int,
    float *, ptrdiff_t, ptrdiff_t, int, int, int);

/* For n columns, the instance and the columns it computes (n up to 8). */
static const struct {
	dot_fn fn;
	int width;
} dot_for[DOT_COLS + 1] = { { NULL, 0 }, { dot_rows_1, 1 },
	{ dot_rows_2, 2 }, { dot_rows_3, 3 }, { dot_rows_4, 4 },
	{ dot_rows_5, 5 }, { dot_rows_8, 8 }, { dot_rows_8, 8 },
	{ dot_rows_8, 8 } };

/* xt[j][kk] = x[kk][j0 + j] for j < n, zero rows up to N. */
static void
pack_rows(const float *x, int ldx, int k, int j0, int n, int N,
    uint16_t *xt)
{
	int kk, j;

	for (kk = 0; kk < k; kk++)
		for (j = 0; j < N; j++)
			xt[(size_t)j * k + kk] = j < n ?
			    bf16_round(x[(size_t)kk * ldx + j0 + j]) : 0;
}

/*
 * AMX path. The B tile of chunk c holds xv[c][r][j][2] =
 * x[32c + 2r + {0, 1}][j0 + j]: pairs of consecutive k interleaved, as
 * the tile product wants them.
 */
#define TILE_C	0
#define TILE_A	1
#define TILE_B	2

AMX_TARGET static void
pack_tiles(const float *x, int ldx, int k, int j0, int n, uint16_t *xv)
{
	__mmask16 m = lanes16(0, n);
	int kk;

	/* a vector pass: the scalar one was 6 us of a 40 us product */
	for (kk = 0; kk < k; kk += 2) {
		__mmask16 mb = kk + 1 < k ? m : 0;
		__m512i lo = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(
		    _mm512_maskz_loadu_ps(m, x + (size_t)kk * ldx + j0)));
		__m512i hi = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(
		    _mm512_maskz_loadu_ps(mb, x + (size_t)(kk + 1) * ldx +
		    j0)));

		_mm512_storeu_si512(xv + (size_t)(kk / 2) * 32,
		    _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
	}
}

AMX_TARGET static void
amx_rows(const uint16_t *wp, int k, const uint16_t *xv, int n, float *y,
    ptrdiff_t ym, ptrdiff_t yj, int accumulate, int m0, int m1)
{
	float out[16][16];
	int m, c, i, j;

	AMX_CONFIGURE(3);
	for (m = m0; m < m1; m += 16) {
		_tile_zero(TILE_C);
		for (c = 0; c < k / 32; c++) {
			_mm_prefetch((const char *)packed_at(wp, k, m, c) +
			    PREFETCH_BYTES, _MM_HINT_T0);
			_tile_loadd(TILE_A, packed_at(wp, k, m, c), 64);
			_tile_loadd(TILE_B, xv + (size_t)c * 512, 64);
			_tile_dpbf16ps(TILE_C, TILE_A, TILE_B);
		}
		_tile_stored(TILE_C, out, 64);
		for (i = 0; i < 16 && m + i < m1; i++)
			for (j = 0; j < n; j++)
				store(y + (m + i) * ym + j * yj, out[i][j],
				    accumulate);
	}
	_tile_release();
}

int
gemv_amx_init(void)
{
	/* Linux hands out AMX state only on request (5.16 and later) */
	return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM,
	    XFEATURE_XTILEDATA) == 0;
}

/* Rows [m0, m1) of one block of columns, already packed in xs. */
static void
gemv_range(const struct gemv_args *a, const uint16_t *xs, int n, float *y,
    int m0, int m1)
{
	if (a->amx) {
		amx_rows(a->wp, a->k, xs, n, y, a->ym, a->yj, a->accumulate,
		    m0, m1);
		return;
	}
	dot_for[n].fn(a->wp, a->k, xs, n, y, a->ym, a->yj, a->accumulate,
	    m0, m1);
}

void
gemv_bf16(const struct gemv_args *a, uint16_t *scratch)
{
	int per = a->amx ? 16 : DOT_COLS, j0, nb;
	int blocks = (a->rows + 15) / 16;
	int par = (size_t)a->rows * a->k >= PAR_MIN_ELEMS;

	for (j0 = 0; j0 < a->n; j0 += per) {
		float *y = a->y + j0 * a->yj;

		nb = a->n - j0 < per ? a->n - j0 : per;
		if (a->amx)
			pack_tiles(a->x, a->ldx, a->k, j0, nb, scratch);
		else
			pack_rows(a->x, a->ldx, a->k, j0, nb, dot_for[nb].width,
			    scratch);
#pragma omp parallel if (par)
		{
			int t = omp_get_thread_num();
			int nt = omp_get_num_threads();
			/* whole 16-row blocks per thread */
			int m0 = (int)((long long)blocks * t / nt) * 16;
			int m1 = (int)((long long)blocks * (t + 1) / nt) * 16;

			if (m1 > a->rows)
				m1 = a->rows;
			if (m0 < m1)
				gemv_range(a, scratch, nb, y, m0, m1);
		}
	}
}
