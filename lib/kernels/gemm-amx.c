/*
 * Channels-first products on AMX tiles: Y[M][N] = W[M][K] X[K][N] + b,
 * then optionally GELU, or added to Y (the residual).
 *
 * Why by hand: oneDNN 2.6 runs this product, the ANE layout's 1x1
 * convolution over a window, at 210-360 GFLOP/s on AMX, because it
 * treats X as the weights and cannot write a channels-first result from
 * its fast kernel; it reaches 460-650 only if the activations are
 * transposed. With W packed once at load (gemv.c's 16x32 blocks are the
 * A tiles) and X repacked per call into B tiles, the C tiles are rows of
 * Y as they are: the accumulators start from Y for the residual, the bias
 * is one more tile product, and GELU runs on Y after the products or on X
 * as it is packed. For the MLP, fc1's results can instead go through GELU
 * straight into fc2's B tiles (y_packed, x_packed): no f32 hidden layer.
 */
#include <immintrin.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "err.h"
#include "gemm-win.h"

#define AMX_TARGET	AMX_TARGET_BF16

/* tile registers (macros: the intrinsics paste the number into asm) */
#define T_C00	0
#define T_C01	1
#define T_C10	2
#define T_C11	3
#define T_A0	4
#define T_A1	5
#define T_B0	6
#define T_B1	7

/*
 * A tiles that add the bias through one more tile product against a B
 * tile whose first row is all ones: row i of block mb holds the bias
 * split as bf16 hi + lo (so it keeps ~16 bits), then zeros.
 */
static void
pack_bias(const float *bias, int m, uint16_t *bt, uint16_t *ones)
{
	int i;

	memset(bt, 0, (size_t)(m + 15) / 16 * 1024);
	for (i = 0; i < m; i++) {
		uint16_t hi = bf16_round(bias[i]);

		bt[(size_t)i * 32] = hi;
		bt[(size_t)i * 32 + 1] = bf16_round(bias[i] - bf16_value(hi));
	}
	memset(ones, 0, 1024);
	for (i = 0; i < 32; i++)
		ones[i] = 0x3f80;	/* 1.0 */
}

/*
 * The 32 x 32 results of a block (tmp, rows m.., columns 32 nb2..) as two
 * B tiles of the next product, whose k is p->m: GELU with WIN_GELU, zero
 * past p->m rows and p->n columns, as win_pack_x would have written them.
 */
AMX_TARGET static void
block_to_tiles(const struct win_gemm *p, float tmp[32][32], int m, int nb2)
{
	int kc = (p->m + 31) / 32, gelu = (p->flags & WIN_GELU) != 0, h, r;

	for (h = 0; h < 2; h++) {
		int nb = 2 * nb2 + h;
		__mmask16 cm = lanes16(16 * nb, p->n);
		uint16_t *out = p->y_packed + ((size_t)nb * kc + m / 32) * 512;

		for (r = 0; r < 16; r++) {
			__mmask16 ma = m + 2 * r < p->m ? cm : 0;
			__mmask16 mb = m + 2 * r + 1 < p->m ? cm : 0;
			_mm512_storeu_si512(out + r * 32, bf16_pairs(
			    load_lanes(&tmp[2 * r][16 * h], ma, gelu),
			    load_lanes(&tmp[2 * r + 1][16 * h], mb, gelu)));
		}
	}
}

/*
 * Rows [m, m + 32) (or 16) by columns [32 nb2, +32): the C tiles start
 * from y when accumulating, take the bias as one more product, and go
 * straight back to y. (Copying them out through memory to add bias or
 * the residual with vector code stalled for longer than the products
 * took: 10 ms against 1.3 ms for 1536x384x1500.)
 */
AMX_TARGET static void
block(const struct win_gemm *p, const uint16_t *xv, const uint16_t *bt,
    const uint16_t *ones, int m, int two_rows, int nb2)
{
	int kc = (p->k + 31) / 32, c;
	size_t ldy = (size_t)p->ldy * 4;
	const uint16_t *a0 = p->w + (size_t)(m / 16) * kc * 512;
	const uint16_t *a1 = a0 + (size_t)kc * 512;
	const uint16_t *b0 = xv + (size_t)(2 * nb2) * kc * 512;
	const uint16_t *b1 = b0 + (size_t)kc * 512;
	float *y0 = p->y + (size_t)m * p->ldy + 32 * nb2;
	float *y1 = y0 + (size_t)16 * p->ldy;
	float tmp[32][32];

	if (p->y_packed != NULL) {
		/* the results go to tiles through tmp; y is not touched */
		y0 = &tmp[0][0];
		y1 = &tmp[16][0];
		ldy = sizeof(tmp[0]);
	}
	/*
	 * Load Y even when it is overwritten: a tile store into lines that
	 * are not in cache stalls. Measured on 1536x384x1500, one thread,
	 * alternating runs: 6.1 ms storing into cold lines, 3.3 ms with
	 * this load first.
	 */
	if (p->y_packed == NULL) {
		_tile_loadd(T_C00, y0, ldy);
		_tile_loadd(T_C01, y0 + 16, ldy);
		if (two_rows) {
			_tile_loadd(T_C10, y1, ldy);
			_tile_loadd(T_C11, y1 + 16, ldy);
		}
	}
	if (!(p->flags & WIN_ACCUMULATE) || p->y_packed != NULL) {
		_tile_zero(T_C00);
		_tile_zero(T_C01);
		_tile_zero(T_C10);
		_tile_zero(T_C11);
	}
	for (c = 0; c < kc; c++) {
		_tile_loadd(T_B0, b0 + (size_t)c * 512, 64);
		_tile_loadd(T_B1, b1 + (size_t)c * 512, 64);
		_tile_loadd(T_A0, a0 + (size_t)c * 512, 64);
		_tile_dpbf16ps(T_C00, T_A0, T_B0);
		_tile_dpbf16ps(T_C01, T_A0, T_B1);
		if (two_rows) {
			_tile_loadd(T_A1, a1 + (size_t)c * 512, 64);
			_tile_dpbf16ps(T_C10, T_A1, T_B0);
			_tile_dpbf16ps(T_C11, T_A1, T_B1);
		}
	}
	if (bt != NULL) {
		_tile_loadd(T_B0, ones, 64);
		_tile_loadd(T_A0, bt + (size_t)(m / 16) * 512, 64);
		_tile_dpbf16ps(T_C00, T_A0, T_B0);
		_tile_dpbf16ps(T_C01, T_A0, T_B0);
		if (two_rows) {
			_tile_loadd(T_A1, bt + (size_t)(m / 16 + 1) * 512, 64);
			_tile_dpbf16ps(T_C10, T_A1, T_B0);
			_tile_dpbf16ps(T_C11, T_A1, T_B0);
		}
	}
	_tile_stored(T_C00, y0, ldy);
	_tile_stored(T_C01, y0 + 16, ldy);
	if (two_rows) {
		_tile_stored(T_C10, y1, ldy);
		_tile_stored(T_C11, y1 + 16, ldy);
	}
	if (p->y_packed != NULL)
		block_to_tiles(p, tmp, m, nb2);
}

/* GELU over row i of y, in place. */
AMX_TARGET static void
gelu_row(const struct win_gemm *p, int i)
{
	float *y = p->y + (size_t)i * p->ldy;
	int j;

	for (j = 0; j < p->n; j += 16) {
		__mmask16 m = lanes16(j, p->n);

		_mm512_mask_storeu_ps(y + j, m, gelu512(_mm512_maskz_loadu_ps(m,
		    y + j)));
	}
}

/*
 * Thread t of nt: its share of the 32x32 blocks, columns outermost: a
 * thread's B panel stays in L1 while it walks down W.
 */
AMX_TARGET static void
run_share(const struct win_gemm *p, const uint16_t *xv, const uint16_t *bt,
    const uint16_t *ones, int t, int nt)
{
	int mbs = (p->m + 31) / 32, nbs = (p->n + 31) / 32, total = mbs * nbs;
	int i, i0 = total * t / nt, i1 = total * (t + 1) / nt;

	AMX_CONFIGURE(8);
	for (i = i0; i < i1; i++) {
		int m = i % mbs * 32;

		block(p, xv, bt, ones, m, m + 16 < p->m, i / mbs);
	}
	_tile_release();
}

void
amx_gemm_run(const struct win_gemm *p, uint16_t *scratch)
{
	uint16_t *bt = NULL, *ones;

	ones = scratch + win_packed_bytes(p->k, p->n) / 2;
	if (p->bias != NULL) {
		bt = ones + 512;
		pack_bias(p->bias, p->m, bt, ones);
	}
	if (p->x_packed == NULL)
		win_pack_x(p->x, p->ldx, p->k, p->n,
		    (p->flags & WIN_GELU_X) != 0, scratch);
#pragma omp parallel
	run_share(p, p->x_packed != NULL ? p->x_packed : scratch, bt, ones,
	    omp_get_thread_num(), omp_get_num_threads());
	/*
	 * GELU afterwards, row by row: applied per 32x32 block it walked
	 * 32 rows 6 KB apart at a time and cost more than the products.
	 */
	if ((p->flags & WIN_GELU) && p->y_packed == NULL) {
		int i;

#pragma omp parallel for schedule(static)
		for (i = 0; i < p->m; i++)
			gelu_row(p, i);
	}
}
