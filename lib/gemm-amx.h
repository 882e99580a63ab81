/*
 * Channels-first window products on AMX tiles (gemm-amx.c), used by
 * gemm.c when the CPU has AMX and the weights are packed (gemv_pack).
 */
#ifndef SOTTO_GEMM_AMX_H
#define SOTTO_GEMM_AMX_H

#include <stddef.h>
#include <stdint.h>

#define AMX_GELU	1	/* y = gelu(w x + b) */
#define AMX_ACCUMULATE	2	/* y += w x + b */
#define AMX_GELU_X	4	/* the product takes gelu(x) */

/* y[m][n] (row stride ldy) = W[m][k] x[k][n] (row stride ldx) + bias */
struct amx_gemm {
	const uint16_t *w;	/* packed by gemv_pack, borrowed */
	int m, k, n;
	const float *x;		/* borrowed */
	int ldx;
	float *y;		/* borrowed */
	int ldy;
	const float *bias;	/* [m] or NULL, borrowed */
	int flags;
	/*
	 * Optional, borrowed. x_packed: x already in B tiles (a previous
	 * product's y_packed; x and ldx unused). y_packed: y is written
	 * (after GELU with AMX_GELU) as bf16 B tiles for a product with
	 * k = m, amx_gemm_packed_bytes(m, n), instead of to y.
	 */
	const uint16_t *x_packed;
	uint16_t *y_packed;
};

/* Bytes of a y_packed for an m x n result. */
size_t	amx_gemm_packed_bytes(int m, int n);

/* Bytes of scratch amx_gemm_run needs for this shape. */
size_t	amx_gemm_scratch_bytes(int m, int k, int n);

/*
 * 1 if amx_gemm_run can do the shape: rows of y 64-byte aligned with
 * room for n rounded up to 32 (the tiles write whole 32-column blocks;
 * what lands past n is padding).
 */
int	amx_gemm_fits(int m, int k, int n, int ldy);

/* Needs AMX granted (gemv_amx_init) and amx_gemm_fits(); y 64-byte
 * aligned; w packed with k padded to 32. */
void	amx_gemm_run(const struct amx_gemm *, uint16_t *scratch);

#endif
