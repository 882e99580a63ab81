/*
 * Encoder self-attention on AMX tiles (attn-amx.c): one 30 s window,
 * channels-first q; k; v [3d][1500] in, [d][1500] out, rows
 * WHISPER_AUDIO_LD apart.
 */
#ifndef SOTTO_ATTN_AMX_H
#define SOTTO_ATTN_AMX_H

#include "internal.h"

struct attn_amx;

/*
 * Buffers for d channels in n_head heads of 64, for up to
 * omp_get_max_threads() threads. Fails (the caller falls back to the
 * composed products) for other head widths. Free with attn_amx_free().
 */
int	attn_amx_new(int d, int n_head, struct attn_amx **ret, char *err);
void	attn_amx_free(struct attn_amx *);

/* out[h*64 + c][q] = softmax_k(q.k / 8) v, per head h; bf16 products. */
int	attn_amx_run(struct attn_amx *, const float *qkv, float *out,
	    char *err);

#endif
