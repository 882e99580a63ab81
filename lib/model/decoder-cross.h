/*
 * Between decoder.c (the passes, the self-attention caches, the output
 * head) and decoder-cross.c (cross-attention over the window).
 */
#ifndef SOTTO_DECODER_CROSS_H
#define SOTTO_DECODER_CROSS_H

#include "model.h"

/*
 * The columns of one decoder pass: work holds the activations of all n
 * columns; columns [col0[o], col0[o + 1]) are beams 0, 1, ... of state
 * own[o], whose caches and window they attend to.
 */
struct decoder_cols {
	struct sotto_state *work;
	struct sotto_state *const *own;
	const int *col0;
	int n_own;
};

/* Cross-attention of the n columns of cs in layer, into work->dattn. */
int	decoder_cross_attn(const struct decoder_cols *cs, int layer, int n,
	    char *err);
/*
 * The same for a prefill of n tokens of st; with st->tap, the scores of
 * the heads it wants are handed to it.
 */
int	decoder_cross_prefill(struct sotto_state *st, int layer, int n,
	    char *err);

#endif
