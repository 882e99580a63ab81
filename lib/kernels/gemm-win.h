/*
 * Window products Y[M][N] = W[M][K] X[K][N] + b over channels-first
 * activations (the ANE layout's 1x1 convolution), shared by the two
 * hand-written kernels gemm.c picks between:
 *
 * - amx_gemm_run (gemm-amx.c): AMX tile products;
 * - dp_gemm_run (gemm-dp.c): AVX512-BF16 dot products (vdpbf16ps), for
 *   CPUs with AVX512-BF16 and no AMX (AMD Zen 4, Intel Cooper Lake).
 *
 * Both read W packed once at load by gemv_pack (16 rows x 32 k blocks)
 * and X repacked per call by win_pack_x into the B layout: pairs of
 * consecutive rows of X interleaved, 16 positions per 64-byte row. That
 * row is both one row of an AMX B tile and the vector operand of one
 * vdpbf16ps, so the two kernels share every buffer layout and give the
 * same arithmetic (bf16 inputs, f32 accumulation) up to summation order.
 */
#ifndef SOTTO_GEMM_WIN_H
#define SOTTO_GEMM_WIN_H

#include <stddef.h>
#include <stdint.h>

#define WIN_GELU	1	/* y = gelu(w x + b) */
#define WIN_ACCUMULATE	2	/* y += w x + b */
#define WIN_GELU_X	4	/* the product takes gelu(x) */
/* WIN_GELU and WIN_ACCUMULATE are never set together. */

/* y[m][n] (row stride ldy) = W[m][k] x[k][n] (row stride ldx) + bias */
struct win_gemm {
	const uint16_t *w;	/* packed by gemv_pack, borrowed */
	int m, k, n;
	const float *x;		/* borrowed */
	int ldx;
	float *y;		/* borrowed */
	int ldy;
	const float *bias;	/* [m] or NULL, borrowed */
	int flags;
	/*
	 * Optional, borrowed. x_packed: x already in the B layout (a
	 * previous product's y_packed; x and ldx unused). y_packed: y is
	 * written (after GELU with WIN_GELU) in the B layout of a product
	 * with k = m, win_packed_bytes(m, n), instead of to y.
	 */
	const uint16_t *x_packed;
	uint16_t *y_packed;
};

/* Bytes of a y_packed for an m x n result. */
size_t	win_packed_bytes(int m, int n);

/* Bytes of scratch either kernel needs for this shape. */
size_t	win_scratch_bytes(int m, int k, int n);

/*
 * 1 if the kernel (amx: amx_gemm_run, else dp_gemm_run) can do the
 * shape. AMX tiles write whole 32-column blocks, so the rows of y must
 * be 64-byte aligned with room for n rounded up to 32 (what lands past n
 * is padding); the dot-product kernel writes only the n columns.
 */
int	win_gemm_fits(int m, int k, int n, int ldy, int amx);

/*
 * X [k][n] (row stride ldx) into the B layout at xv:
 * xv[nb][c][r][j][2] = X[32c + 2r + {0,1}][16nb + j], zero past k and n,
 * through GELU when gelu is set. Shares the rows among the threads.
 * Needs AVX512-BF16.
 */
void	win_pack_x(const float *x, int ldx, int k, int n, int gelu,
	    uint16_t *xv);

/* Y by AMX tile products: needs AMX granted (gemv_amx_init) and
 * win_gemm_fits(); y 64-byte aligned. scratch: win_scratch_bytes. */
void	amx_gemm_run(const struct win_gemm *, uint16_t *scratch);

/* The same by AVX512-BF16 dot products, on any CPU with AVX512-BF16. */
void	dp_gemm_run(const struct win_gemm *, uint16_t *scratch);

/*
 * Precision int8's window products (gemm-i8.c): W as signed int8 in
 * gemv-i8.c's blocks (gemv_i8_pack with rowsum), X rounded to 8 bits
 * per position. m a multiple of 32, k of 4; flags WIN_GELU or
 * WIN_ACCUMULATE (not WIN_GELU_X, no packed operands).
 */
struct i8_win {
	const uint8_t *w;	/* borrowed */
	const float *scale;	/* [m] */
	const int32_t *rowsum;	/* [m] */
	int m, k, n;
	const float *x;		/* borrowed */
	int ldx;
	float *y;		/* borrowed */
	int ldy;
	const float *bias;	/* [m] or NULL */
	int flags;
};

size_t	i8_win_scratch_bytes(int k, int n);
/* Needs AVX512-VNNI (gemv_i8_supported). */
void	i8_gemm_run(const struct i8_win *, void *scratch);

/*
 * The same without AVX512-VNNI (gemm-u8.c): W as int8 rows [m][k]
 * (u8_gemm_pack; m a multiple of 8), X rounded to 7 bits per position,
 * by oneDNN's u8 x s8 GEMM. Fails only if oneDNN does.
 */
void	u8_gemm_pack(const uint16_t *f16, int rows, int k, int row0,
	    int8_t *w, float *scale, int32_t *rowsum);
/*
 * Columns [j0, j0 + nj) (nj <= 8) of X [k][...] (row stride ldx) rounded
 * to 0..127 per column into xq [k][n]; each column's scale to sx[j], its
 * scale times its zero point to szp[j].
 */
void	u8_round_cols(const float *x, int ldx, int k, int n, int j0, int nj,
	    uint8_t *xq, float *sx, float *szp);
/* scratch for products of up to m rows and k columns, hidden the MLP's
 * hidden rows (0 for u8_gemm_run), for the calling thread's team */
size_t	u8_scratch_bytes(int m, int k, int hidden);
int	u8_gemm_run(const struct i8_win *, void *scratch, char *err);
/* y += fc2 gelu(fc1 x + b1) + b2: fc1 with x, fc2 with y (fc1's y and
 * fc2's x are the scratch's) */
int	u8_mlp_run(const struct i8_win *fc1, const struct i8_win *fc2,
	    void *scratch, char *err);

#endif
