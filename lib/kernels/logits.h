/*
 * The decoder's output head from 4-bit estimates plus exact rescoring of
 * the top of each column (logits.c). Used by bf16 models, on AMX or with
 * AVX512-VNNI, and by int8 models on AVX2 (logits-avx2.c); fp32 models
 * keep the exact product.
 */
#ifndef SOTTO_LOGITS_H
#define SOTTO_LOGITS_H

#include <stdint.h>

#define LOGITS_EXACT	64	/* logits per column recomputed exactly */
#define LOGITS_MAX_D	1280	/* widest model (large) */
#define LOGITS_SCRATCH(d)	((size_t)(d) * 16)	/* bytes */

struct logits_head;

/* The estimates' kernel, and the layout of the nibbles it reads. */
enum logits_kernel {
	LOGITS_AMX,	/* AMX int8 tiles (AMX granted, gemv_amx_init) */
	LOGITS_VNNI,	/* vpdpbusd: logits_head_vnni() */
	LOGITS_AVX2,	/* vpmaddubsw: gemv_i8_avx2_supported() */
};

/*
 * Quantize the token embedding f16 [n_vocab][d] (borrowed: it must
 * outlive the head; d a multiple of 64) for the kernel's products.
 * Free with logits_head_free().
 */
int	logits_head_new(const void *f16, int n_vocab, int d,
	    enum logits_kernel kernel, struct logits_head **ret, char *err);
/* 1 if the CPU has what LOGITS_VNNI needs. */
int	logits_head_vnni(void);
void	logits_head_free(struct logits_head *);

/*
 * out[j][v] = W[v] . x[:, j] for the n <= 16 columns of x [d][n] (rows
 * ldx apart); scratch holds LOGITS_SCRATCH(d) bytes, 64-byte aligned.
 */
int	logits_head_run(const struct logits_head *, const float *x, int ldx,
	    int n, float *out, int8_t *scratch, char *err);

/*
 * out[v] = W[v] . x exactly (the f16 rows, in f32) for v in [v0, v1), x
 * one column [d]: for logits a caller needs beyond the top 64 (the
 * language tokens when detecting the language).
 */
void	logits_head_exact(const struct logits_head *, const float *x, int v0,
	    int v1, float *out);

/*
 * The LOGITS_EXACT largest of row[0..n) (n >= LOGITS_EXACT) into top
 * (indices, any order): the logits a head recomputes exactly (here and
 * gemv-i8-avx2.c's rescoring).
 */
void	logits_top(const float *row, int n, int *top);

#endif
