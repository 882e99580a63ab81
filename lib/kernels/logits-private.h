/*
 * The 4-bit output head's layout and the parts its AVX2 kernels
 * (logits-avx2.c) share with logits.c; nothing else includes it.
 */
#ifndef SOTTO_LOGITS_PRIVATE_H
#define SOTTO_LOGITS_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include "logits.h"

#define KC	64		/* int8 values of k per tile row */
#define QMAX	7		/* weights round to -QMAX .. QMAX */
#define ZERO	8		/* stored as q + ZERO, a nibble */
#define MAX_OUT	8		/* outlier channels, at most */
#define OUT_SD	4.0		/* spread over the mean spread of an outlier */
#define T_C	0
#define T_A	1
#define T_B	2

/*
 * The nibbles of a block of 16 rows (vocabulary entries), d / 2 bytes a
 * row, in one of two layouts:
 * - AMX: [d / KC][16 rows][KC / 2]: an A tile per KC values of k; byte i
 *   of a tile row holds k = i (low nibble) and k = i + KC / 2;
 * - VNNI and AVX2: [d / 8][16 rows][4]: a vector per 8 values of k;
 *   byte kk of row i holds k = kk (low nibble) and k = kk + 4, so the
 *   low and the high nibbles are each the 16 rows x 4 k that vpdpbusd
 *   (or vpmaddubsw, in two halves of 8 rows) takes.
 */
struct logits_head {
	int n_vocab, d, blocks;
	enum logits_kernel kernel;
	uint8_t *w;		/* [blocks][d / 2 * 16] nibbles */
	float *scale;		/* [blocks * 16] */
	float *mean;		/* [d] channel means, 0 on outlier channels */
	int n_out, out_c[MAX_OUT];	/* the outlier channels */
	float *out_w;		/* [n_out][blocks * 16] their weights */
	const uint16_t *f16;	/* [n_vocab][d] in the GGUF, borrowed */
};

static inline int
is_outlier(const struct logits_head *lh, int c)
{
	int o;

	for (o = 0; o < lh->n_out; o++)
		if (lh->out_c[o] == c)
			return 1;
	return 0;
}

/* One product's columns, as the estimates need them. */
struct xcols {
	float sx[16];		/* int8 scale */
	int32_t sum[16];	/* sum of the int8 values, for ZERO */
	float base[16];		/* mean . x */
	float xo[MAX_OUT][16];	/* x on the outlier channels */
};

/* logits-avx2.c: logits.c's AVX-512 parts, by AVX2, FMA and F16C */
void	logits_avx2_row_sums(const struct logits_head *lh, int v0, int v1,
	    float *s, float *q);
void	logits_avx2_quantize_row(struct logits_head *lh, int v);
void	logits_avx2_estimate(const struct logits_head *lh, const int8_t *xq,
	    const struct xcols *xc, int n, float *out, int b0, int b1);

#endif
