/*
 * Window products Y[M][N] = W[M][K] X[K][N] + b by AVX512-BF16 dot
 * products (vdpbf16ps): the path for CPUs with AVX512-BF16 and no AMX,
 * such as AMD Zen 4.
 *
 * Why by hand: oneDNN 2.6 takes the channels-first product as X^T W^T
 * and, without AMX, reached about 0.2 TFLOP/s on the encoder's shapes on
 * a 2-core Zen 4 (docs/benchmarks.md), where this kernel keeps the
 * results of a block in registers: bias, GELU and the residual are
 * applied there, and Y is written once, channels-first as the ANE layout
 * keeps it. It reads the same buffers as the AMX kernel (gemm-win.h):
 *
 *   a block is MR rows of Y by NR groups of 16 positions;
 *   for each pair of k, one 64-byte row of X's B layout per group is the
 *   vector operand, and W's pair (m, k..k+1) is broadcast from the
 *   packed weights as one dword (an embedded broadcast).
 *
 * MR x NR = 24 accumulators, 3 vector loads and 8 broadcasts per 24
 * vdpbf16ps: the dot products, not the loads, bound the block.
 */
#include <immintrin.h>
#include <omp.h>
#include <string.h>

#include "amx.h"
#include "gemm-win.h"

#define MR	8	/* rows of Y per block */
#define NR	3	/* 16-position groups per block */

/*
 * Rows [m, m + MR) by groups [nb0, nb0 + nr) of p's product, from X in
 * the B layout at xv. nr is a constant in each caller so that the
 * accumulators stay in registers.
 */
BF16_TARGET static inline __attribute__((always_inline)) void
dp_block(const struct win_gemm *p, const uint16_t *xv, int m, int nb0,
    const int nr)
{
	int kc = (p->k + 31) / 32, i, j, c, r;
	/* pair r of row m + i in chunk c is dword (c * 16 + i) * 16 + r */
	const uint32_t *w = (const uint32_t *)(p->w +
	    ((size_t)(m / 16) * kc * 16 + m % 16) * 32);
	/* group nb0 + j, chunk c, row r is vector ((j * kc) + c) * 16 + r */
	const __m512i *x = (const __m512i *)(xv + (size_t)nb0 * kc * 512);
	__m512 acc[MR][NR];

	for (i = 0; i < MR; i++) {
		__m512 b = _mm512_set1_ps(p->bias != NULL && m + i < p->m ?
		    p->bias[m + i] : 0.0f);

		for (j = 0; j < nr; j++)
			acc[i][j] = b;
	}
	for (c = 0; c < kc; c++) {
		const uint32_t *wc = w + (size_t)c * 256;

		for (r = 0; r < 16; r++) {
			__m512bh xj[NR];

			for (j = 0; j < nr; j++)
				xj[j] = (__m512bh)_mm512_load_si512(x +
				    ((size_t)j * kc + c) * 16 + r);
			for (i = 0; i < MR; i++) {
				__m512bh wi = (__m512bh)_mm512_set1_epi32(
				    (int)wc[i * 16 + r]);

				for (j = 0; j < nr; j++)
					acc[i][j] = _mm512_dpbf16_ps(acc[i][j],
					    wi, xj[j]);
			}
		}
	}
	for (j = 0; j < nr; j++) {
		int nb = nb0 + j;
		__mmask16 lanes = lanes16(16 * nb, p->n);

		for (i = 0; i < MR; i++) {
			__m512 v = acc[i][j];

			if (p->flags & WIN_GELU)
				v = gelu512(v);
			acc[i][j] = _mm512_maskz_mov_ps(lanes, v);
		}
		if (p->y_packed != NULL) {
			int kc2 = (p->m + 31) / 32;
			/* rows m + i, m + i + 1 are one row of the B layout */
			uint16_t *out = p->y_packed + (((size_t)nb * kc2 +
			    m / 32) * 16 + m % 32 / 2) * 32;

			for (i = 0; i < MR; i += 2)
				_mm512_store_si512(out + i / 2 * 32, bf16_pairs(
				    acc[i][j], acc[i + 1][j]));
			continue;
		}
		for (i = 0; i < MR && m + i < p->m; i++) {
			float *y = p->y + (size_t)(m + i) * p->ldy + 16 * nb;
			__m512 v = acc[i][j];

			if (p->flags & WIN_ACCUMULATE)
				v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(
				    lanes, y));
			_mm512_mask_storeu_ps(y, lanes, v);
		}
	}
}

BF16_TARGET static void
dp_block_3(const struct win_gemm *p, const uint16_t *xv, int m, int nb0)
{
	dp_block(p, xv, m, nb0, 3);
}

BF16_TARGET static void
dp_block_2(const struct win_gemm *p, const uint16_t *xv, int m, int nb0)
{
	dp_block(p, xv, m, nb0, 2);
}

BF16_TARGET static void
dp_block_1(const struct win_gemm *p, const uint16_t *xv, int m, int nb0)
{
	dp_block(p, xv, m, nb0, 1);
}

/*
 * Thread t of nt: its share of the blocks, panels of NR groups
 * outermost, so a thread's panel of X stays in cache while it walks
 * down W.
 */
static void
run_share(const struct win_gemm *p, const uint16_t *xv, int t, int nt)
{
	int groups = (p->n + 15) / 16, panels = (groups + NR - 1) / NR;
	int mbs = (p->m + MR - 1) / MR, total = panels * mbs;
	int w, w0 = (int)((long long)total * t / nt);
	int w1 = (int)((long long)total * (t + 1) / nt);

	for (w = w0; w < w1; w++) {
		int nb0 = w / mbs * NR, m = w % mbs * MR;
		int nr = groups - nb0 < NR ? groups - nb0 : NR;

		if (nr == 3)
			dp_block_3(p, xv, m, nb0);
		else if (nr == 2)
			dp_block_2(p, xv, m, nb0);
		else
			dp_block_1(p, xv, m, nb0);
	}
}

/*
 * Rows [m, round up to 32) of a y_packed hold zeros, as win_pack_x
 * writes past k; so do the groups past n up to a whole 32 positions.
 */
static void
zero_packed_padding(const struct win_gemm *p)
{
	int kc2 = (p->m + 31) / 32, groups = (p->n + 31) / 32 * 2, nb, r, j;

	for (nb = 0; nb < groups; nb++) {
		uint16_t *tile = p->y_packed + ((size_t)nb * kc2 + kc2 - 1) *
		    512;

		if (16 * nb >= p->n) {
			memset(p->y_packed + (size_t)nb * kc2 * 512, 0,
			    (size_t)kc2 * 1024);
			continue;
		}
		for (r = 0; r < 16; r++) {
			int row = (kc2 - 1) * 32 + 2 * r;

			if (row >= p->m)
				memset(tile + r * 32, 0, 64);
			else if (row + 1 >= p->m)	/* odd m: half a pair */
				for (j = 0; j < 16; j++)
					tile[r * 32 + 2 * j + 1] = 0;
		}
	}
}

void
dp_gemm_run(const struct win_gemm *p, uint16_t *scratch)
{
	const uint16_t *xv = p->x_packed;

	if (xv == NULL) {
		win_pack_x(p->x, p->ldx, p->k, p->n,
		    (p->flags & WIN_GELU_X) != 0, scratch);
		xv = scratch;
	}
#pragma omp parallel
	run_share(p, xv, omp_get_thread_num(), omp_get_num_threads());
	if (p->y_packed != NULL)
		zero_packed_padding(p);
}
