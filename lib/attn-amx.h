/*
 * Attention over one 30 s window on AMX tiles (attn-amx.c): the encoder's
 * self-attention and the decoder's cross-attention. Channels-first: head
 * h is the row block [64h, 64h + 64) of q, k, v and out.
 */
#ifndef SOTTO_ATTN_AMX_H
#define SOTTO_ATTN_AMX_H

#include "internal.h"

struct attn_amx;

/*
 * Buffers for d channels in heads of 64, n_slots sets of keys and values
 * (one per decoder layer, or one), up to max_q queries per call and
 * omp_get_max_threads() threads. Fails for other head widths (the caller
 * falls back to composed products). Free with attn_amx_free().
 */
int	attn_amx_new(int d, int n_head, int n_slots, int max_q,
	    struct attn_amx **ret, char *err);
void	attn_amx_free(struct attn_amx *);

/* Keys and values of the window, k and v [d][WHISPER_AUDIO_LD], into slot
 * (rounded to bf16). */
int	attn_amx_set_kv(struct attn_amx *, int slot, const float *k,
	    const float *v, char *err);

/*
 * out[h*64 + c][j * 1] (rows ldo apart) = softmax(q_j . k / 8) v per head,
 * for the n queries q [d][n] (rows ldq apart) against slot's keys.
 */
int	attn_amx_query(struct attn_amx *, int slot, const float *q, int ldq,
	    int n, float *out, int ldo, char *err);

#endif
