/*
 * The model's internals: hyper-parameters, weights, per-stream state, and
 * the encoder and decoder that run them. The weight matrix (struct mat,
 * gemm.h) and the window's shape (window.h) are the kernels'.
 *
 * Layout (DESIGN.md, "The ANE layout"): activations are channels-first,
 * [C][S] with the sequence contiguous; every linear layer is a 1x1
 * convolution y[Cout][S] = W[Cout][Cin] x[Cin][S] + b.
 *
 * Ownership: struct sotto_model owns the GGUF (its own copy of the file,
 * of which only what is read after the load is kept), the tokenizer and
 * every converted weight buffer; vectors (biases, norms, tables) point into
 * the GGUF's copy. struct sotto_state owns every activation and cache buffer;
 * they are allocated once in sotto_state_new() and never during a window.
 */
#ifndef SOTTO_MODEL_H
#define SOTTO_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "gemm.h"
#include "sotto.h"
#include "window.h"

#define WHISPER_MAX_BEAMS	16

struct gguf;
struct tokenizer;
struct mel;

struct hparams {
	int n_mels;
	int n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer;
	int n_text_ctx, n_text_state, n_text_head, n_text_layer;
	int n_vocab;
};

/* openai: encoder.blocks.N (pre-LN residual attention block) */
struct enc_layer {
	const float *attn_ln_w, *attn_ln_b;	/* [d] */
	struct mat qkv;				/* [3d][d]: query; key; value */
	float *qkv_b;				/* [3d] owned: b_q; 0; b_v */
	struct mat o;				/* attn.out [d][d] */
	const float *o_b;			/* [d] */
	const float *mlp_ln_w, *mlp_ln_b;	/* [d] */
	struct mat fc1;				/* mlp.0 [4d][d] */
	const float *fc1_b;			/* [4d] */
	struct mat fc2;				/* mlp.2 [d][4d] */
	const float *fc2_b;			/* [d] */
};

/* openai: decoder.blocks.N */
struct dec_layer {
	const float *attn_ln_w, *attn_ln_b;
	struct mat qkv;				/* self-attention [3d][d] */
	float *qkv_b;				/* [3d] owned */
	struct mat o;
	const float *o_b;
	const float *cross_ln_w, *cross_ln_b;
	struct mat cq;				/* cross_attn.query [d][d] */
	const float *cq_b;
	struct mat ckv;				/* cross_attn.key; value [2d][d] */
	float *ckv_b;				/* [2d] owned: 0; b_v */
	struct mat co;
	const float *co_b;
	const float *mlp_ln_w, *mlp_ln_b;
	struct mat fc1;
	const float *fc1_b;
	struct mat fc2;
	const float *fc2_b;
};

struct sotto_model {
	struct gguf *gguf;		/* owned: the file, kept in part */
	struct tokenizer *tok;		/* owned */
	struct gemm *gemm;		/* owned: compute backend */
	struct hparams hp;
	char name[64];
	enum sotto_precision precision;	/* FP32 or BF16, never AUTO */
	int int8;			/* precision int8: the encoder's
					   and decoder's products from
					   int8 weights (precision is
					   BF16) */
	int int8_avx2;			/* precision int8 without
					   AVX512-VNNI: the decoder's
					   products and head from int8
					   weights by AVX2, the rest fp32
					   (precision is FP32) */
	int threads;
	int multilingual;

	const float *mel_filters;	/* [n_mels][201] */
	int32_t *align_heads;		/* owned: (layer, head) pairs, the
					   cross-attention heads word timing
					   reads (align.c) */
	int n_align_heads;
	int32_t *suppress;		/* owned, sorted */
	size_t n_suppress;
	int32_t *suppress_begin;	/* owned */
	size_t n_suppress_begin;

	/* encoder */
	struct mat conv1;		/* [d][3 * n_mels]: taps side by side */
	const float *conv1_b;
	struct mat conv2;		/* [d][3 * d] */
	const float *conv2_b;
	const float *enc_pos;		/* [d][1500] */
	struct enc_layer *enc;		/* owned [n_audio_layer] */
	const float *ln_post_w, *ln_post_b;

	/* decoder */
	struct mat tok_emb;		/* [n_vocab][d], also the output head
					   (empty when head is set) */
	struct logits_head *head;	/* owned; 4-bit output head, or NULL */
	const void *tok_emb_f16;	/* [n_vocab][d] F16 in the GGUF, for
				   exact embedding lookups */
	const float *dec_pos;		/* [n_text_ctx][d] */
	struct dec_layer *dec;		/* owned [n_text_layer] */
	const float *dec_ln_w, *dec_ln_b;
};

/*
 * Per-stream buffers. The self-attention caches are slots,
 * kv[slot][layer][2][n_head][n_text_ctx][dh] (key then value; each
 * head's positions token-major). Beam b writes position t into slot b,
 * and finds its position t in slot kv_slot[b][t]: a beam that takes over
 * another's history takes its row of kv_slot, not its caches, since a
 * slot's position t, once written, is never written again while beams
 * may read it (decoder.c).
 */
struct attn_win;
struct logits_head;

/*
 * Cross-attention scores a decoder prefill hands out (align.c, for word
 * timing): in layer l, head h with slot[l * n_text_head + h] >= 0 has
 * its scaled scores q_j . k of the first n_keys keys written to
 * buf[(slot * n + j) * n_keys + key] (before the softmax) for the n
 * prompt tokens j, then fold(tap, l, n) is called.
 */
struct dec_tap {
	const int8_t *slot;		/* [n_text_layer][n_text_head] */
	int n_keys;
	float *buf;
	void (*fold)(struct dec_tap *, int layer, int n);
};

struct sotto_state {
	const struct sotto_model *model;	/* borrowed */
	struct mel *mel;			/* owned */
	char err[SOTTO_ERR_MAX];

	/* encoder scratch, channels-first; LD is WHISPER_AUDIO_LD */
	float *conv_in;		/* [3 * max(n_mels, d)][3000] shifted taps */
	float *x;		/* [d][LD] residual stream */
	float *h;		/* [d][LD] normalised */
	float *qkv;		/* [3d][LD] */
	float *attn;		/* [d][LD] */
	float *ffn;		/* [4d][LD], or conv1's [d][3000] */
	/* composed attention (no attn_win): */
	float *scores;		/* [1500][1500] one head */
	uint16_t *qkv16;	/* [3d][LD] bf16 copy (bf16 models) */
	uint16_t *p16;		/* [1500][1500] bf16 probabilities */
	struct attn_win *attn_win;	/* owned; NULL in fp32 */
	float *enc_out;		/* [d][LD] */

	/* decoder */
	void *cross_kv;		/* [layer][2][d][WHISPER_AUDIO_LD] of
				   float, or of binary16 in precision
				   int8 on AVX2 (model->int8_avx2); NULL
				   when cross_win holds them */
	struct attn_win *cross_win;	/* owned; NULL in fp32 */
	void *kv;		/* [slots][layer][2][n_head][n_text_ctx]
				   [dh] of float, or bf16 in a bf16
				   model */
	int32_t *kv_slot;	/* [2][WHISPER_MAX_BEAMS][n_text_ctx]: the
				   slot of each beam's positions, and room
				   to reorder them */
	int kv_beams;		/* beams the caches have room for */
	int n_kv;		/* positions filled (same for all beams) */
	float *dx;		/* [d][n_text_ctx] decoder residual stream */
	float *dh;		/* [d][n_text_ctx] */
	float *dqkv;		/* [3d][n_text_ctx] */
	float *dattn;		/* [d][n_text_ctx] */
	float *dffn;		/* [4d][n_text_ctx] */
	float *dscores;		/* [n_text_ctx][1500] */
	float *logits;		/* [WHISPER_MAX_BEAMS][n_vocab] */
	int8_t *head_x;		/* LOGITS_SCRATCH(d) for model->head */
	float *logprobs;	/* [n_vocab] scratch */
	float *mel_window;	/* [n_mels][3000] */
	struct dec_tap *tap;	/* borrowed; set during a word alignment */
};

/* model-meta.c: hyper-parameters, name, tokenizer, suppress lists */
int	model_read_meta(struct sotto_model *, char *err);
/* model-compute.c: m's precision, threads and gemm from p. */
int	model_compute_setup(struct sotto_model *m,
	    const struct sotto_model_params *p, char *err);
/* The products' path, as sotto_model_info's compute. */
const char	*model_compute_name(const struct sotto_model *);
/*
 * m's thread count (or the calling thread's sotto_thread_share, if less)
 * for the OpenMP regions the calling thread opens; _all: m's count, for
 * buffers sized per thread.
 */
void	model_use_threads(const struct sotto_model *m);
void	model_use_all_threads(const struct sotto_model *m);

/* encoder.c: mel [n_mels][3000] -> st->enc_out [d][1500] */
int	encoder_forward(struct sotto_state *, const float *mel, char *err);

/* decoder.c */
int	decoder_cross_kv(struct sotto_state *, char *err);
int	decoder_prefill(struct sotto_state *, const int32_t *tokens, int n,
	    const int *logit_rows, int n_logit_rows, float *logits, char *err);
/*
 * Logits [n_cols][n_vocab] (n_cols <= WHISPER_MAX_BEAMS) of more columns
 * of the last prefill of n tokens. decoder_exact_logit() makes
 * row[token] the exact logit of token at column col (the 4-bit head of
 * a bf16 model estimates all but its top 64).
 */
int	decoder_more_logits(struct sotto_state *, int n, const int *cols,
	    int n_cols, float *logits, char *err);
void	decoder_exact_logit(struct sotto_state *, int n, int col,
	    int32_t token, float *row);
int	decoder_step(struct sotto_state *, const int32_t *tokens, int n_beams,
	    float *logits, char *err);
/*
 * Logits [v0, v1) computed exactly for the one column the last prefill
 * or step scored (a bf16 model's head estimates all but its top 64).
 */
void	decoder_logits_exact(const struct sotto_state *, int v0, int v1,
	    float *logits);
/*
 * One cached step of beam 0 of each of n states of one model (n at most
 * WHISPER_MAX_BEAMS), as one batch; st[0]'s buffers hold the activations
 * and logits is [n][n_vocab]. The same logits as n decoder_step calls.
 */
int	decoder_step_many(struct sotto_state *const *st,
	    const int32_t *tokens, int n, float *logits, char *err);
int	decoder_reserve(struct sotto_state *, int n_beams, char *err);
int	decoder_fork(struct sotto_state *, int n_beams);
int	decoder_reorder(struct sotto_state *, const int *source, int n_beams);

#endif
