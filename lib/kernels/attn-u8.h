/*
 * The encoder's self-attention over the window from bytes (attn-u8.c):
 * precision int8 on CPUs with AVX2 and no AVX512-VNNI.
 */
#ifndef SOTTO_ATTN_U8_H
#define SOTTO_ATTN_U8_H

#include <stddef.h>

/*
 * out[h dh + c][i] = sum_j softmax_j(q_i . k_j / sqrt(dh)) v[c][j] for
 * each head h, from qkv = q; k; v, each [d][n] (row stride ld), all
 * borrowed.
 */
struct attn_u8 {
	const float *qkv;
	int ld;
	int d, n_head, n;
	float *out;
	int ldo;
	int threads;	/* OpenMP threads at most (attn_u8_bytes) */
};

/* 1 if attn_u8_run takes d channels in n_head heads over n positions. */
int	attn_u8_fits(int d, int n_head, int n);
/* Scratch attn_u8_run needs with up to threads OpenMP threads. */
size_t	attn_u8_bytes(int d, int n, int n_head, int threads);
/* Needs AVX2, FMA and F16C; fails only if oneDNN does. scratch 64-byte
 * aligned. */
int	attn_u8_run(const struct attn_u8 *, void *scratch, char *err);

#endif
