/*
 * Matrix products, and the weights they read (mat.c).
 *
 * gemm.c picks the code for each product: the hand-written kernels for
 * packed weights (gemm-win.h over a window or a prompt, gemv.c and
 * gemv-f16.c for a few columns), else oneDNN (gemm-dnnl.c): dnnl_sgemm
 * in fp32, bf16 matmul primitives created once per shape and reused.
 * f32 accumulation and output throughout. A struct gemm is used by one
 * thread at a time (the compute thread).
 */
#ifndef SOTTO_GEMM_H
#define SOTTO_GEMM_H

#include <stdint.h>

#include "sotto.h"

struct gemm;

/*
 * The ISA the kernels may use: oneDNN's effective one (a dnnl_cpu_isa_t),
 * capped by ONEDNN_MAX_CPU_ISA and, in a -Dmax_isa=avx2 build, at AVX2.
 * Every hand kernel picks its form by it, so that one setting moves all.
 */
unsigned	gemm_cpu_isa(void);

/* Resolve AUTO to what the CPU does best; fails if BF16 is unsupported. */
int	gemm_pick_precision(enum sotto_precision want,
	    enum sotto_precision *ret, char *err);

int	gemm_new(enum sotto_precision, struct gemm **ret, char *err);
void	gemm_free(struct gemm *);

/* 1 if bf16 products may use AMX tiles directly (CPU and kernel allow). */
int	gemm_has_amx(const struct gemm *);
/* FP32 or BF16, never AUTO. */
enum sotto_precision	gemm_precision(const struct gemm *);

/* ---- weights (mat.c) ---- */

/* A weight matrix [rows = Cout][cols = Cin], converted at load. */
struct mat {
	int rows, cols;
	float *f32;		/* owned; NULL when the model runs in bf16 (or
				   for an fp32 head, which keeps only f16) */
	uint16_t *bf16;		/* owned; NULL when the model runs in fp32 */
	uint16_t *packed;	/* owned; bf16 in gemv.c's blocks, replaces
				   bf16 (decoder weights) */
	/* precision int8: int8 in gemv-i8.c's blocks and a scale per row,
	   instead of bf16 and packed; with i8_rowsum (the rows' sums) the
	   signed form of gemm-i8.c's window products (encoder), without
	   it gemv_i8's unsigned one (decoder); owned */
	uint8_t *i8;
	float *i8_scale;
	int32_t *i8_rowsum;
	int i8_rows;		/* i8 is int8 rows [rows][cols] with
				   i8_rowsum, for gemm-u8.c's window products
				   (encoder, precision int8 without VNNI) */
	int i8_avx2;		/* i8 is gemv-i8-avx2.c's signed form, its
				   rows padded to 32: an fp32 model's decoder
				   on CPUs without AVX512-VNNI */
	/* fp32 decoder weights: F16 [rows][cols] for few-column products
	   (gemv-f16.c), the GGUF's own or f16_owned; with i8_avx2, an output
	   head's rows for rescoring its top logits (gemm_xtw) */
	const uint16_t *f16;
	uint16_t *f16_owned;
	/* the F16 row blocks in the file the matrix came from, borrowed:
	   read at load only (gguf_release gives them back after it) */
	const void *src[3];
	int src_rows[3], n_src;
};

/* Fill m from F16 data [rows][cols] in the gemm's precision. */
int	mat_init_f16(struct mat *m, const struct gemm *, const void *f16,
	    int rows, int cols, char *err);
/* Same from several F16 blocks stacked row-wise (e.g. q; k; v). */
int	mat_init_f16_stack(struct mat *m, const struct gemm *,
	    const void *const *blocks, const int *block_rows, int n_blocks,
	    int cols, char *err);
/*
 * The same, converted straight into the packed layout mat_pack makes
 * (bf16, cols a multiple of GEMV_K_ALIGN: one pass over the weights, no
 * row-major copy; mat_pack then leaves it alone); else as
 * mat_init_f16_stack.
 */
int	mat_init_packed_stack(struct mat *m, const struct gemm *,
	    const void *const *blocks, const int *block_rows, int n_blocks,
	    int cols, char *err);
/*
 * Precision int8: m as int8 with a scale per row from F16 blocks stacked
 * row-wise, no bf16 copy; mat_pack leaves it alone. For products of a
 * few columns (gemv-i8.c, the decoder), or with window set for products
 * over the window (gemm-i8.c, the encoder). Only where mat_i8_fits (rows
 * and cols multiples of GEMV_I8_ALIGN).
 */
int	mat_init_i8_stack(struct mat *m, const void *const *blocks,
	    const int *block_rows, int n_blocks, int cols, int window,
	    char *err);
int	mat_i8_fits(int rows, int cols);
/*
 * The same for gemv-i8-avx2.c (precision int8 without AVX512-VNNI): any
 * rows, cols a multiple of GEMV_I8_ALIGN (mat_i8_avx2_fits).
 */
int	mat_init_i8_avx2_stack(struct mat *m, const void *const *blocks,
	    const int *block_rows, int n_blocks, int cols, char *err);
int	mat_i8_avx2_fits(int cols);
/*
 * The same as int8 rows for gemm-u8.c's window products (precision int8's
 * encoder without AVX512-VNNI): rows a multiple of 8 (mat_i8_rows_fits).
 */
int	mat_init_i8_rows_stack(struct mat *m, const void *const *blocks,
	    const int *block_rows, int n_blocks, int cols, char *err);
int	mat_i8_rows_fits(int rows);
/*
 * Repack a bf16 m into 16x32 blocks: for the decoder's few-column
 * products (gemv.c), and for products over a window (window set;
 * gemm-win.h). In fp32, for the decoder (window 0): keep its F16 rows for
 * few-column products (gemv-f16.c) beside the f32 copy. Afterwards m
 * works only with gemm_wx, gemm_linear and gemm_xtw.
 */
int	mat_pack(struct mat *m, const struct gemm *, int window, char *err);
/* fp32, after mat_pack: keep only the F16 rows (an output head, whose
 * products always have few columns). */
void	mat_drop_f32(struct mat *m);
void	mat_free(struct mat *m);

/* ---- products (gemm.c) ---- */

/*
 * y[M][N] (row stride ldy) = W[M][K] x[K][N] (row stride ldx), plus the
 * old y when accumulate is set. M, K come from W.
 */
int	gemm_wx(struct gemm *, const struct mat *w, const float *x, int ldx,
	    int n, float *y, int ldy, int accumulate, char *err);

#define GEMM_GELU	1	/* y = gelu(W x + b) */
#define GEMM_ACCUMULATE	2	/* y += W x + b */
#define GEMM_GELU_X	4	/* the product takes gelu(x); x may be
				   overwritten with gelu(x) */

/* y = W x + bias (bias may be NULL), then flags; fused where possible. */
int	gemm_linear(struct gemm *, const struct mat *w, const float *x,
	    int ldx, int n, float *y, int ldy, const float *bias, int flags,
	    char *err);

/*
 * The MLP block: y += fc2 gelu(fc1 x + b1) + b2. hidden is fc1->rows x
 * ldh floats of scratch for the hidden layer (with AMX it holds it as
 * bf16 tiles instead).
 */
int	gemm_mlp(struct gemm *, const struct mat *fc1, const float *b1,
	    const struct mat *fc2, const float *b2, const float *x, int ldx,
	    int n, float *y, int ldy, float *hidden, int ldh, char *err);

/*
 * y[N][M] (row stride ldy) = x[K][N]^T W[M][K]^T: the product with the
 * result transposed, used for logits so that each row is one sequence.
 */
int	gemm_xtw(struct gemm *, const struct mat *w, const float *x, int ldx,
	    int n, float *y, int ldy, char *err);

/* ---- oneDNN's own products (gemm-dnnl.c) ---- */

/*
 * bf16 C[m][n] (row stride ldc, f32) = A[m][k] B[k][n], each operand
 * given by its row and column strides, so transposed views are free.
 */
int	gemm_bf16(struct gemm *, int m, int n, int k, const uint16_t *a,
	    int64_t sa0, int64_t sa1, const uint16_t *b, int64_t sb0,
	    int64_t sb1, float *c, int ldc, char *err);

/* Plain row-major fp32 C = alpha op(A) op(B) + beta C (attention). */
int	gemm_f32(char transa, char transb, int m, int n, int k, float alpha,
	    const float *a, int lda, const float *b, int ldb, float beta,
	    float *c, int ldc, char *err);

#endif
