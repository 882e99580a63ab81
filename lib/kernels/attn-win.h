/*
 * Attention over one 30 s window: the encoder's self-attention and the
 * decoder's cross-attention, channels-first in and out (head h is the
 * row block [64h, 64h + 64) of q, k, v and out), by one of two kernels
 * on the same buffers:
 *
 * - attn-amx.c: AMX tile products;
 * - attn-dp.c: AVX512-BF16 dot products (vdpbf16ps), for CPUs without
 *   AMX.
 *
 * attn-win.c owns the buffers, packs Q, K and V into the shapes both
 * read, and shares the (head, query block) pairs among the threads.
 */
#ifndef SOTTO_ATTN_WIN_H
#define SOTTO_ATTN_WIN_H

#include <stdint.h>

#include "window.h"

#define ATTN_NP	1504	/* keys padded to a multiple of 32 */
#define ATTN_QB	16	/* queries per block */
#define ATTN_DH	64	/* head width of every Whisper size */

struct attn_win;

/*
 * Buffers for d channels in heads of 64, n_slots sets of keys and values
 * (one per decoder layer, or one), up to max_q queries per call and
 * omp_get_max_threads() threads; amx picks the tile kernel (AMX granted,
 * gemv_amx_init), else the dot-product one. Fails for other head widths
 * (the caller falls back to composed products). Free with
 * attn_win_free().
 */
int	attn_win_new(int d, int n_head, int n_slots, int max_q, int amx,
	    struct attn_win **ret, char *err);
void	attn_win_free(struct attn_win *);

/* Keys and values of the window, k and v [d][WHISPER_AUDIO_LD], into slot
 * (rounded to bf16). */
int	attn_win_set_kv(struct attn_win *, int slot, const float *k,
	    const float *v, char *err);

/*
 * out[h*64 + c][j * 1] (rows ldo apart) = softmax(q_j . k / 8) v per head,
 * for the n queries q [d][n] (rows ldq apart) against slot's keys.
 */
int	attn_win_query(struct attn_win *, int slot, const float *q, int ldq,
	    int n, float *out, int ldo, char *err);

/*
 * Scores a caller keeps from a query (word timing, align.c): for each
 * head h with slot[h] >= 0, the scaled scores q_j . k / 8 of the first
 * n_keys keys go to out[(slot[h] * n + j) * n_keys + key], before the
 * softmax; n_keys <= WHISPER_N_AUDIO_CTX.
 */
struct attn_keep {
	const int8_t *slot;	/* [n_head] */
	float *out;
	int n_keys;
};

/* attn_win_query(), keeping the scores keep asks for (NULL: none). */
int	attn_win_query_keep(struct attn_win *, int slot, const float *q,
	    int ldq, int n, float *out, int ldo, const struct attn_keep *keep,
	    char *err);

/* ---- for the kernels ---- */

/* Per-thread scores and probabilities of one query block. */
struct attn_thread {
	float s[ATTN_QB][ATTN_NP];
	uint16_t p[ATTN_QB][ATTN_NP];
};

/*
 * Layouts (bf16), those of AMX tiles; for vdpbf16ps a 64-byte tile row
 * is the vector operand and a dword of Q or P the broadcast one:
 *   q: [head][q_rows][DH] token-major, scaled by 1/sqrt(DH);
 *   k: [slot][head][NP/16][DH/32][16 r][16 key][2]: 16 keys, dims 2r, 2r+1;
 *   v: [slot][head][NP/32][DH/16][16 r][16 dim][2]: 16 dims, keys 2r, 2r+1.
 */
struct attn_win {
	int d, n_head, n_slots, max_q, n_threads, amx;
	int q_rows;	/* max_q rounded up to whole query blocks */
	uint16_t *q, *k, *v;
	struct attn_thread *t;	/* [n_threads] */
};

/* Where a call's results go: out[(h * DH + c) * ldo + q]. */
struct attn_out {
	float *out;
	int ldo, n;
	const struct attn_keep *keep;	/* or NULL */
};

/*
 * p[i] = bf16(exp(s[i] - max)) over the real keys (0 for the padding);
 * returns their sum.
 */
float	attn_softmax_row(const float *s, uint16_t *p);

/*
 * Queries [q0, q0 + 16) (those below o->n) of head h against slot's keys,
 * into o, with t's scratch. A thread calls attn_amx_begin() before its
 * AMX blocks and attn_amx_end() after them.
 */
void	attn_amx_begin(void);
void	attn_amx_end(void);
void	attn_amx_block(const struct attn_win *, struct attn_thread *t,
	    int slot, int h, int q0, const struct attn_out *o);
void	attn_dp_block(const struct attn_win *, struct attn_thread *t,
	    int slot, int h, int q0, const struct attn_out *o);

#endif
