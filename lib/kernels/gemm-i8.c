/*
 * Window products Y[M][N] = W[M][K] X[K][N] + b from int8 weights, by
 * AVX512-VNNI dot products (vpdpbusd): precision int8's encoder. A byte
 * product is twice as many multiply-adds per instruction as a bf16 one
 * (vdpbf16ps), and the encoder's products are bound by arithmetic: on
 * this Zen 4 oneDNN's int8 matmul ran the [4d x d] x 1500 product of
 * large-v3 at 270-440 GOP/s a core against 140-160 for its bf16 one.
 *
 * W: each row rounded to int8 with one scale (max |w| / 127), signed,
 * in gemv-i8.c's blocks of 32 rows x k, k-quad by k-quad, and each row's
 * sum of q. X: each position (column) rounded to 8 bits with one scale,
 * sx = max |x| / 127, stored as q + 128 (unsigned, as vpdpbusd takes its
 * vector operand), 16 positions x 4 k per 64 bytes. Then
 *
 *   y = sw sx (sum (q_x + 128) q_w - 128 sum q_w) + b
 *
 * exactly in int32 (|sum| <= 255 * 127 * k, under 2^31 for k up to
 * 66000). A block is MR rows of Y by NR groups of 16 positions: per
 * k-quad, NR vector loads of X and MR broadcast dwords of W feed MR x NR
 * vpdpbusd, as gemm-dp.c does with pairs of k.
 *
 * The columns keep 8 bits here (the decoder's per-token products keep
 * 16, gemv-i8.c): over a window two byte products per weight would cost
 * what the bf16 product does.
 */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <string.h>

#include "amx.h"
#include "gemm-win.h"
#include "gemv.h"

#define VNNI_TARGET	__attribute__((target( \
	"avx512f,avx512bw,avx512vl,avx512vnni,f16c,fma")))
#define MR	8	/* rows of Y per block */
#define NR	3	/* 16-position groups per block */
#define RB	32	/* rows per block of W (gemv-i8.c) */

size_t
i8_win_scratch_bytes(int k, int n)
{
	int groups = (n + 15) / 16;

	/* X as bytes, then the positions' scales */
	return (size_t)groups * 16 * ((k + 3) / 4 * 4) + (size_t)groups *
	    16 * sizeof(float);
}

/*
 * Per position, max |x| over the k rows, then X into the byte layout:
 * xv[nb][q][j][4] = q_x of rows 4q..4q+3 at position 16 nb + j, plus
 * 128; zero (128) past k and n. Positions are shared among the threads.
 */
VNNI_TARGET static void
pack_x(const float *x, int ldx, int k, int n, uint8_t *xv, float *sx)
{
	int groups = (n + 15) / 16, nq = (k + 3) / 4, nb;

#pragma omp parallel for schedule(static)
	for (nb = 0; nb < groups; nb++) {
		__mmask16 lanes = lanes16(16 * nb, n);
		__m512 mx = _mm512_setzero_ps(), inv;
		__m512i *out = (__m512i *)(xv + (size_t)nb * nq * 64);
		int r, q, i;

		for (r = 0; r < k; r++)
			mx = _mm512_max_ps(mx, _mm512_abs_ps(
			    _mm512_maskz_loadu_ps(lanes, x + (size_t)r * ldx +
			    16 * nb)));
		_mm512_storeu_ps(sx + 16 * nb, _mm512_div_ps(mx,
		    _mm512_set1_ps(127.0f)));
		inv = _mm512_maskz_div_ps(_mm512_cmp_ps_mask(mx,
		    _mm512_setzero_ps(), _CMP_GT_OQ), _mm512_set1_ps(127.0f),
		    mx);
		for (q = 0; q < nq; q++) {
			__m512i v = _mm512_setzero_si512();

			for (i = 0; i < 4; i++) {
				int row = 4 * q + i;
				__m512i b = _mm512_set1_epi32(128);

				if (row < k)
					b = _mm512_add_epi32(b,
					    _mm512_cvtps_epi32(_mm512_mul_ps(
					    _mm512_maskz_loadu_ps(lanes, x +
					    (size_t)row * ldx + 16 * nb), inv)));
				v = _mm512_or_si512(v, _mm512_slli_epi32(
				    _mm512_and_si512(b, _mm512_set1_epi32(0xff)),
				    8 * i));
			}
			_mm512_store_si512(out + q, v);
		}
	}
}

/* acc + vpdpbusd(a, b): in asm, as in gemv-i8.c (GCC 12's intrinsic
 * copies the accumulator to another register and back). */
VNNI_TARGET static inline __m512i
dpbusd(__m512i acc, __m512i a, __m512i b)
{
	__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
	return acc;
}

/*
 * Rows [m, m + MR) by groups [nb0, nb0 + nr), nr a constant in each
 * caller so the accumulators stay in registers.
 */
VNNI_TARGET static inline __attribute__((always_inline)) void
i8_block(const struct i8_win *p, const uint8_t *xv, const float *sx, int m,
    int nb0, const int nr)
{
	int nq = p->k / 4, i, j, q;
	const uint8_t *w = p->w + (size_t)(m / RB) * RB * p->k +
	    (size_t)(m % RB) * 4;
	const __m512i *x = (const __m512i *)(xv + (size_t)nb0 * nq * 64);
	__m512i acc[MR][NR];

	for (i = 0; i < MR; i++)
		for (j = 0; j < nr; j++)
			acc[i][j] = _mm512_setzero_si512();
	for (q = 0; q < nq; q++) {
		const uint8_t *wq = w + (size_t)q * RB * 4;
		__m512i xj[NR];

		for (j = 0; j < nr; j++)
			xj[j] = _mm512_load_si512(x + (size_t)j * nq + q);
		for (i = 0; i < MR; i++) {
			int32_t d;
			__m512i wi;

			memcpy(&d, wq + 4 * i, 4);
			wi = _mm512_set1_epi32(d);
			for (j = 0; j < nr; j++)
				acc[i][j] = dpbusd(acc[i][j], xj[j], wi);
		}
	}
	for (j = 0; j < nr; j++) {
		int nb = nb0 + j;
		__mmask16 lanes = lanes16(16 * nb, p->n);
		__m512 s = _mm512_loadu_ps(sx + 16 * nb);

		for (i = 0; i < MR && m + i < p->m; i++) {
			float *y = p->y + (size_t)(m + i) * p->ldy + 16 * nb;
			__m512 v = _mm512_mul_ps(_mm512_mul_ps(s,
			    _mm512_set1_ps(p->scale[m + i])), _mm512_sub_ps(
			    _mm512_cvtepi32_ps(acc[i][j]), _mm512_set1_ps(
			    128.0f * (float)p->rowsum[m + i])));

			if (p->bias != NULL)
				v = _mm512_add_ps(v, _mm512_set1_ps(
				    p->bias[m + i]));
			if (p->flags & WIN_GELU)
				v = gelu512(v);
			if (p->flags & WIN_ACCUMULATE)
				v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(
				    lanes, y));
			_mm512_mask_storeu_ps(y, lanes, v);
		}
	}
}

VNNI_TARGET static void
i8_block_3(const struct i8_win *p, const uint8_t *xv, const float *sx, int m,
    int nb0)
{
	i8_block(p, xv, sx, m, nb0, 3);
}

VNNI_TARGET static void
i8_block_2(const struct i8_win *p, const uint8_t *xv, const float *sx, int m,
    int nb0)
{
	i8_block(p, xv, sx, m, nb0, 2);
}

VNNI_TARGET static void
i8_block_1(const struct i8_win *p, const uint8_t *xv, const float *sx, int m,
    int nb0)
{
	i8_block(p, xv, sx, m, nb0, 1);
}

/* Thread t of nt: its share of the blocks, panels of X outermost. */
static void
run_share(const struct i8_win *p, const uint8_t *xv, const float *sx, int t,
    int nt)
{
	int groups = (p->n + 15) / 16, panels = (groups + NR - 1) / NR;
	int mbs = (p->m + MR - 1) / MR, total = panels * mbs;
	int w, w0 = (int)((long long)total * t / nt);
	int w1 = (int)((long long)total * (t + 1) / nt);

	for (w = w0; w < w1; w++) {
		int nb0 = w / mbs * NR, m = w % mbs * MR;
		int nr = groups - nb0 < NR ? groups - nb0 : NR;

		if (nr == 3)
			i8_block_3(p, xv, sx, m, nb0);
		else if (nr == 2)
			i8_block_2(p, xv, sx, m, nb0);
		else
			i8_block_1(p, xv, sx, m, nb0);
	}
}

void
i8_gemm_run(const struct i8_win *p, void *scratch)
{
	int groups = (p->n + 15) / 16;
	uint8_t *xv = scratch;
	float *sx = (float *)(xv + (size_t)groups * 16 * p->k);

	pack_x(p->x, p->ldx, p->k, p->n, xv, sx);
#pragma omp parallel
	run_share(p, xv, sx, omp_get_thread_num(), omp_get_num_threads());
}
