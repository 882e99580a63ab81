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
#include "gemm-amx.h"

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

/* erf-GELU, as layers.c's: erfc(z) = t exp(-z^2 + P(t)). */
AMX_TARGET static inline __m512
gelu512(__m512 v)
{
	static const float c[] = { 0.17087277f, -0.82215223f, 1.48851587f,
	    -1.13520398f, 0.27886807f, -0.18628806f, 0.09678418f,
	    0.37409196f, 1.00002368f, -1.26551223f };
	__m512 z = _mm512_mul_ps(_mm512_abs_ps(v), _mm512_set1_ps(
	    0.70710678f)), t, p, erfc_z;
	size_t i;

	t = _mm512_fmadd_ps(z, _mm512_set1_ps(0.5f), _mm512_set1_ps(1.0f));
	/* 1 / t by rcp14 and one Newton step (~1e-8 relative), not div */
	p = _mm512_rcp14_ps(t);
	t = _mm512_mul_ps(p, _mm512_fnmadd_ps(t, p, _mm512_set1_ps(2.0f)));
	p = _mm512_set1_ps(c[0]);
	for (i = 1; i < sizeof(c) / sizeof(c[0]); i++)
		p = _mm512_fmadd_ps(p, t, _mm512_set1_ps(c[i]));
	erfc_z = _mm512_mul_ps(t, exp512(_mm512_fmadd_ps(_mm512_sub_ps(
	    _mm512_setzero_ps(), z), z, p)));
	/* v >= 0: v (1 - erfc/2); v < 0: v erfc/2 */
	erfc_z = _mm512_mask_sub_ps(erfc_z, _mm512_cmp_ps_mask(v,
	    _mm512_setzero_ps(), _CMP_GE_OQ), _mm512_set1_ps(2.0f), erfc_z);
	return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), v), erfc_z);
}

/* 16 values of a row of X, through GELU when gelu is set. */
AMX_TARGET static inline __m512i
load_x(const float *row, __mmask16 m, int gelu)
{
	__m512 v = _mm512_maskz_loadu_ps(m, row);

	if (gelu)
		v = _mm512_maskz_mov_ps(m, gelu512(v));
	return _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(v));
}

/*
 * X [k][n] into B tiles: xv[nb][c][r][j][2] = X[32c + 2r + {0,1}][16nb + j],
 * zero past k and n. One 64-byte tile row is two rows of X interleaved.
 * With gelu, the tiles get GELU(X): the activation costs no pass of its
 * own over memory.
 */
AMX_TARGET static void
pack_x(const float *x, int ldx, int k, int n, int gelu, uint16_t *xv)
{
	int kc = (k + 31) / 32, nbs = (n + 31) / 32 * 2, kp;

#pragma omp parallel for schedule(static)
	for (kp = 0; kp < kc * 16; kp++) {
		int r0 = 2 * kp, nb;
		const float *a = r0 < k ? x + (size_t)r0 * ldx : x;
		const float *b = r0 + 1 < k ? a + ldx : x;

		for (nb = 0; nb < nbs; nb++) {
			__mmask16 m = lanes16(16 * nb, n);
			__mmask16 ma = r0 < k ? m : 0, mb = r0 + 1 < k ? m : 0;
			__m512i lo = load_x(a + 16 * nb, ma, gelu);
			__m512i hi = load_x(b + 16 * nb, mb, gelu);

			_mm512_storeu_si512(xv + (((size_t)nb * kc + kp / 16) *
			    16 + kp % 16) * 32, _mm512_or_si512(lo,
			    _mm512_slli_epi32(hi, 16)));
		}
	}
}

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
 * B tiles of the next product, whose k is p->m: GELU with AMX_GELU, zero
 * past p->m rows and p->n columns, as pack_x would have written them.
 */
AMX_TARGET static void
block_to_tiles(const struct amx_gemm *p, float tmp[32][32], int m, int nb2)
{
	int kc = (p->m + 31) / 32, gelu = (p->flags & AMX_GELU) != 0, h, r;

	for (h = 0; h < 2; h++) {
		int nb = 2 * nb2 + h;
		__mmask16 cm = lanes16(16 * nb, p->n);
		uint16_t *out = p->y_packed + ((size_t)nb * kc + m / 32) * 512;

		for (r = 0; r < 16; r++) {
			__mmask16 ma = m + 2 * r < p->m ? cm : 0;
			__mmask16 mb = m + 2 * r + 1 < p->m ? cm : 0;
			__m512i lo = load_x(&tmp[2 * r][16 * h], ma, gelu);
			__m512i hi = load_x(&tmp[2 * r + 1][16 * h], mb, gelu);

			_mm512_storeu_si512(out + r * 32, _mm512_or_si512(lo,
			    _mm512_slli_epi32(hi, 16)));
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
block(const struct amx_gemm *p, const uint16_t *xv, const uint16_t *bt,
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
	if (!(p->flags & AMX_ACCUMULATE) || p->y_packed != NULL) {
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
gelu_row(const struct amx_gemm *p, int i)
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
run_share(const struct amx_gemm *p, const uint16_t *xv, const uint16_t *bt,
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

size_t
amx_gemm_packed_bytes(int m, int n)
{
	return (size_t)(m + 31) / 32 * 32 * ((n + 31) / 32 * 32) * 2;
}

size_t
amx_gemm_scratch_bytes(int m, int k, int n)
{
	return (size_t)(k + 31) / 32 * 32 * ((n + 31) / 32 * 32) * 2 +
	    (size_t)(m + 15) / 16 * 1024 + 1024;
}

int
amx_gemm_fits(int m, int k, int n, int ldy)
{
	(void)m;
	(void)k;
	return ldy % 16 == 0 && ldy >= (n + 31) / 32 * 32;
}

void
amx_gemm_run(const struct amx_gemm *p, uint16_t *scratch)
{
	uint16_t *bt = NULL, *ones;

	ones = scratch + (size_t)(p->k + 31) / 32 * 32 * ((p->n + 31) / 32 *
	    32);
	if (p->bias != NULL) {
		bt = ones + 512;
		pack_bias(p->bias, p->m, bt, ones);
	}
	if (p->x_packed == NULL)
		pack_x(p->x, p->ldx, p->k, p->n, (p->flags & AMX_GELU_X) != 0,
		    scratch);
#pragma omp parallel
	run_share(p, p->x_packed != NULL ? p->x_packed : scratch, bt, ones,
	    omp_get_thread_num(), omp_get_num_threads());
	/*
	 * GELU afterwards, row by row: applied per 32x32 block it walked
	 * 32 rows 6 KB apart at a time and cost more than the products.
	 */
	if ((p->flags & AMX_GELU) && p->y_packed == NULL) {
		int i;

#pragma omp parallel for schedule(static)
		for (i = 0; i < p->m; i++)
			gelu_row(p, i);
	}
}
