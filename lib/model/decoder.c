/*
 * The text decoder, with its two entry points:
 *
 * - decoder_prefill(), the first-token path: the whole prompt (T tokens)
 *   in one batched pass from position 0, filling beam 0's self-attention
 *   cache; the cross-attention K/V were computed once per window by
 *   decoder_cross_kv() (decoder-cross.c, with the cross-attention).
 * - decoder_step(), the cached-token path: one token per beam, all beams
 *   as the columns of one [C][B] activation, appending to the caches.
 * - decoder_step_many(), the same for one column of each of several
 *   states of one model (sottod's streams due together): the products
 *   and the output head read the weights once for all of them; each
 *   column attends to its own state's caches and window.
 *
 * Caches are slots of [layer][2][n_head][n_text_ctx][dh] (token-major in
 * each head); beam b writes its positions into slot b and reads each
 * from the slot kv_slot names (model.h), so beams share what they have
 * in common.
 *
 * ref: whisper/model.py TextDecoder, ResidualAttentionBlock (cross_attn).
 */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "amx.h"
#include "bigmem.h"
#include "decoder-cross.h"
#include "err.h"
#include "gemm.h"
#include "layers.h"
#include "logits.h"
#include "model.h"

/*
 * Keys (beams x heads x positions) from which a step's self-attention is
 * shared among the threads: below it the work is shorter than waking
 * the other threads. With spinning workers (sotto, sotto-bench) a region
 * costs a few microseconds; at 4096 a greedy step of tiny.en took a
 * median 1.73 ms against 1.58 at 512 (Zen 4, 400 steps, 5 alternating
 * runs), since one beam's 6-8 heads stayed on one thread below about 600
 * positions.
 */
#define SELF_PAR_MIN_KEYS	512

/*
 * Bytes of one self-attention cache entry: bf16 in a bf16 model, where
 * the cache reads were about an eighth of a step (base, long-form file) and
 * the products that make K and V round their inputs to bf16 anyway.
 */
static size_t
kv_elem(const struct sotto_model *m)
{
	return m->precision == SOTTO_PRECISION_BF16 ? 2 : 4;
}

static size_t
kv_beam_bytes(const struct sotto_model *m)
{
	return (size_t)m->hp.n_text_layer * 2 * m->hp.n_text_state *
	    m->hp.n_text_ctx * kv_elem(m);
}

/*
 * Self-attention key (kind 0) or value (kind 1) cache of slot, layer:
 * [n_head][n_text_ctx][dh] of float or bf16 (kv_elem), token-major in
 * each head so that the keys a step reads are contiguous
 * (layer_attend_tm).
 */
static void *
kv_at(const struct sotto_state *st, int slot, int layer, int kind)
{
	const struct sotto_model *m = st->model;
	size_t plane = (size_t)m->hp.n_text_state * m->hp.n_text_ctx;

	return (char *)st->kv + (size_t)slot * kv_beam_bytes(m) +
	    ((size_t)layer * 2 + kind) * plane * kv_elem(m);
}

/* Position t of channel c of a cache (kv_at) set to x. */
static void
kv_put(const struct sotto_model *m, void *cache, int c, int t, float x)
{
	int dh = m->hp.n_text_state / m->hp.n_text_head;
	size_t i = ((size_t)(c / dh) * m->hp.n_text_ctx + t) * dh + c % dh;

	if (kv_elem(m) == 2)
		((uint16_t *)cache)[i] = bf16_round(x);
	else
		((float *)cache)[i] = x;
}

/* Row (part) 0 or 1 of st->kv_slot for beam: its positions' slots. */
static int32_t *
slot_row(const struct sotto_state *st, int part, int beam)
{
	return st->kv_slot + ((size_t)part * WHISPER_MAX_BEAMS + beam) *
	    st->model->hp.n_text_ctx;
}

/*
 * Head h of one query (channel stride ldq) against keys 0 .. n - 1 of
 * beam's caches of layer, each position in its slot; p is n_text_ctx
 * floats of scratch.
 */
static void
kv_attend(const struct sotto_state *st, int beam, int layer, int h,
    const float *q, int ldq, int n, float *out, int ldo, float *p)
{
	const struct sotto_model *m = st->model;
	int ctx = m->hp.n_text_ctx, dh = m->hp.n_text_state /
	    m->hp.n_text_head;
	float scale = 1.0f / sqrtf((float)dh);
	size_t at = (size_t)h * dh * ctx, stride = kv_beam_bytes(m) /
	    kv_elem(m);
	const int32_t *slot = slot_row(st, 0, beam);

	if (kv_elem(m) == 2)
		layer_attend_tm_bf16(q, ldq, (const uint16_t *)kv_at(st, 0,
		    layer, 0) + at, (const uint16_t *)kv_at(st, 0, layer, 1) +
		    at, slot, stride, n, dh, scale, out, ldo, p);
	else
		layer_attend_tm(q, ldq, (const float *)kv_at(st, 0, layer, 0) +
		    at, (const float *)kv_at(st, 0, layer, 1) + at, slot,
		    stride, n, dh, scale, out, ldo, p);
}

int
decoder_reserve(struct sotto_state *st, int n_beams, char *err)
{
	size_t n = kv_beam_bytes(st->model) * n_beams;
	void *kv;

	if (n_beams <= st->kv_beams)
		return 0;
	if (n_beams > WHISPER_MAX_BEAMS)
		return err_set(err, SOTTO_EINVAL, "%d beams (at most %d)",
		    n_beams, WHISPER_MAX_BEAMS);
	if ((kv = bigmem_alloc(n)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory for %d "
		    "decoder caches", n_beams);
	if (st->kv != NULL)
		memcpy(kv, st->kv, kv_beam_bytes(st->model) * st->kv_beams);
	bigmem_free(st->kv);
	st->kv = kv;
	st->kv_beams = n_beams;
	return 0;
}

/* x[:, j] (rows n apart) = embedding of token + position pos. */
static void
embed_col(const struct sotto_model *m, int32_t token, int pos, float *x,
    int n, int j)
{
	const unsigned char *row = m->tok_emb_f16 +
	    (size_t)token * m->hp.n_text_state * 2;
	const float *p = m->dec_pos + (size_t)pos * m->hp.n_text_state;
	int c;

	for (c = 0; c < m->hp.n_text_state; c++) {
		_Float16 h;

		memcpy(&h, row + 2 * c, 2);
		x[(size_t)c * n + j] = (float)h + p[c];
	}
}

/* x[:, j] = token embedding + position pos0 + j (or pos0 for every beam). */
static void
embed(const struct sotto_state *st, const int32_t *tokens, int n, int pos0,
    int same_pos, float *x)
{
	int j;

	for (j = 0; j < n; j++)
		embed_col(st->model, tokens[j], same_pos ? pos0 : pos0 + j, x,
		    n, j);
}

/*
 * Prefill self-attention: T queries, causal, over beam 0's cache, each
 * (head, query) pair by the step's kernel over keys 0 .. i. Why not two
 * sgemm calls per head: with a prompt of previous text (about 150
 * tokens) their dispatch made this 16 ms of a window's 38 ms prefill
 * (tiny.en); the products themselves are 35 MFLOP a layer.
 */
static void
self_attn_prefill(struct sotto_state *st, int layer, int t_n)
{
	const struct sotto_model *m = st->model;
	int d = m->hp.n_text_state, ctx = m->hp.n_text_ctx;
	int n_head = m->hp.n_text_head, dh = d / n_head, c, t, w;
	void *kc = kv_at(st, 0, layer, 0), *vc = kv_at(st, 0, layer, 1);

	for (c = 0; c < d; c++)
		for (t = 0; t < t_n; t++) {
			kv_put(m, kc, c, t, st->dqkv[((size_t)d + c) * t_n +
			    t]);
			kv_put(m, vc, c, t, st->dqkv[((size_t)2 * d + c) *
			    t_n + t]);
		}
	/* each thread has its own ctx floats of dscores for its scores */
#pragma omp parallel for schedule(static) \
    if (n_head * t_n * (t_n + 1) / 2 >= SELF_PAR_MIN_KEYS)
	for (w = 0; w < n_head * t_n; w++) {
		int h = w / t_n, i = w % t_n;

		kv_attend(st, 0, layer, h, st->dqkv + (size_t)h * dh * t_n + i,
		    t_n, i + 1, st->dattn + (size_t)h * dh * t_n + i, t_n,
		    st->dscores + (size_t)omp_get_thread_num() * ctx);
	}
}

/*
 * Head h of column col's K and V (beam b of st) into the caches at st's
 * n_kv: dh values each, contiguous there (kv_at).
 */
static void
kv_append_head(const struct sotto_state *work, const struct sotto_state *st,
    int layer, int n, int col, int b, int h)
{
	const struct sotto_model *m = st->model;
	int d = m->hp.n_text_state, dh = d / m->hp.n_text_head, i, kind;
	size_t at = ((size_t)h * m->hp.n_text_ctx + st->n_kv) * dh;

	for (kind = 0; kind < 2; kind++) {
		const float *x = work->dqkv + ((size_t)(kind + 1) * d +
		    (size_t)h * dh) * n + col;
		void *cache = kv_at(st, b, layer, kind);

		if (kv_elem(m) == 2)
			for (i = 0; i < dh; i++)
				((uint16_t *)cache)[at + i] =
				    bf16_round(x[(size_t)i * n]);
		else
			for (i = 0; i < dh; i++)
				((float *)cache)[at + i] = x[(size_t)i * n];
	}
}

/*
 * Cached step self-attention: one query per column at its state's
 * position n_kv, the (column, head) pairs shared among the threads when
 * there are enough keys to pay for it (5 beams from position 137 for
 * tiny).
 */
static void
self_attn_step(const struct decoder_cols *cs, int layer, int n)
{
	struct sotto_state *work = cs->work;
	const struct sotto_model *m = work->model;
	int d = m->hp.n_text_state, ctx = m->hp.n_text_ctx;
	int n_head = m->hp.n_text_head, dh = d / n_head, o, b, w;
	int own_of[WHISPER_MAX_BEAMS];

	for (o = 0; o < cs->n_own; o++)
		for (b = cs->col0[o]; b < cs->col0[o + 1]; b++)
			own_of[b] = o;
	/*
	 * each pair has its own ctx floats of dscores for its scores; it
	 * writes its own head of its column's new position first (in the
	 * beam's own slot: no other pair reads it), so that the copy is
	 * shared too (done alone before the region, 5 beams' took 14 us,
	 * long enough for the other thread to fall asleep)
	 */
#pragma omp parallel for schedule(static) \
    if (n * n_head * (cs->own[0]->n_kv + 1) >= SELF_PAR_MIN_KEYS)
	for (w = 0; w < n * n_head; w++) {
		int col = w / n_head, h = w % n_head, ow = own_of[col];
		const struct sotto_state *st = cs->own[ow];
		int beam = col - cs->col0[ow];

		kv_append_head(work, st, layer, n, col, beam, h);
		kv_attend(st, beam, layer, h, work->dqkv + (size_t)h * dh * n +
		    col, n, st->n_kv + 1, work->dattn + (size_t)h * dh * n +
		    col, n, work->dscores + (size_t)w * ctx);
	}
}

/* y = W x + b, then residual += y; x, y and residual are [.][n]. */
static int
project_add(struct sotto_state *st, const struct mat *w, const float *b,
    const float *x, int n, char *err)
{
	int rc;

	if ((rc = gemm_wx(st->model->gemm, w, x, n, n, st->dh, n, 0,
	    err)) != 0)
		return rc;
	layer_add_bias(st->dh, w->rows, n, n, b);
	layer_add(st->dx, st->dh, w->rows, n, n);
	return 0;
}

/* One block over n columns: a prompt (prefill), or a cached step. */
static int
decoder_layer(const struct decoder_cols *cs, int li, int n, int prefill,
    char *err)
{
	struct sotto_state *st = cs->work;
	const struct sotto_model *m = st->model;
	const struct dec_layer *l = &m->dec[li];
	struct gemm *g = m->gemm;
	int d = m->hp.n_text_state, rc;

	layer_norm(st->dx, st->dh, d, n, n, l->attn_ln_w, l->attn_ln_b);
	if ((rc = gemm_wx(g, &l->qkv, st->dh, n, n, st->dqkv, n, 0, err)))
		return rc;
	layer_add_bias(st->dqkv, 3 * d, n, n, l->qkv_b);
	if (prefill)
		self_attn_prefill(st, li, n);
	else
		self_attn_step(cs, li, n);
	if ((rc = project_add(st, &l->o, l->o_b, st->dattn, n, err)) != 0)
		return rc;

	layer_norm(st->dx, st->dh, d, n, n, l->cross_ln_w, l->cross_ln_b);
	if ((rc = gemm_wx(g, &l->cq, st->dh, n, n, st->dqkv, n, 0, err)))
		return rc;
	layer_add_bias(st->dqkv, d, n, n, l->cq_b);
	if ((rc = prefill ? decoder_cross_prefill(st, li, n, err) :
	    decoder_cross_attn(cs, li, n, err)) != 0 ||
	    (rc = project_add(st, &l->co, l->co_b, st->dattn, n, err)) != 0)
		return rc;

	layer_norm(st->dx, st->dh, d, n, n, l->mlp_ln_w, l->mlp_ln_b);
	if ((rc = gemm_wx(g, &l->fc1, st->dh, n, n, st->dffn, n, 0, err)))
		return rc;
	layer_bias_gelu(st->dffn, 4 * d, n, n, l->fc1_b);
	return project_add(st, &l->fc2, l->fc2_b, st->dffn, n, err);
}

/* Logits [n_cols][n_vocab] of the chosen columns of the normalised dh. */
static int
decoder_head(struct sotto_state *st, int n, const int *cols, int n_cols,
    float *logits, char *err)
{
	const struct sotto_model *m = st->model;
	int d = m->hp.n_text_state, c, j;
	float *sel = st->dattn;		/* [d][n_cols] */

	for (c = 0; c < d; c++)
		for (j = 0; j < n_cols; j++)
			sel[(size_t)c * n_cols + j] =
			    st->dh[(size_t)c * n + cols[j]];
	if (m->head != NULL)
		return logits_head_run(m->head, sel, n_cols, n_cols, logits,
		    st->head_x, err);
	return gemm_xtw(m->gemm, &m->tok_emb, sel, n_cols, n_cols, logits,
	    m->hp.n_vocab, err);
}

/* Final LayerNorm of all n columns, then the chosen columns' logits. */
static int
decoder_logits(struct sotto_state *st, int n, const int *cols, int n_cols,
    float *logits, char *err)
{
	const struct sotto_model *m = st->model;

	layer_norm(st->dx, st->dh, m->hp.n_text_state, n, n, m->dec_ln_w,
	    m->dec_ln_b);
	return decoder_head(st, n, cols, n_cols, logits, err);
}

int
decoder_more_logits(struct sotto_state *st, int n, const int *cols,
    int n_cols, float *logits, char *err)
{
	if (n_cols < 1 || n_cols > WHISPER_MAX_BEAMS)
		return err_set(err, SOTTO_EINVAL, "%d columns of logits (1 "
		    "to %d)", n_cols, WHISPER_MAX_BEAMS);
	return decoder_head(st, n, cols, n_cols, logits, err);
}

void
decoder_exact_logit(struct sotto_state *st, int n, int col, int32_t token,
    float *row)
{
	const struct sotto_model *m = st->model;
	float x[LOGITS_MAX_D];
	int c;

	if (m->head == NULL)
		return;
	for (c = 0; c < m->hp.n_text_state; c++)
		x[c] = st->dh[(size_t)c * n + col];
	logits_head_exact(m->head, x, token, token + 1, row);
}

void
decoder_logits_exact(const struct sotto_state *st, int v0, int v1,
    float *logits)
{
	/* decoder_logits() left the normalised column in dattn */
	if (st->model->head != NULL)
		logits_head_exact(st->model->head, st->dattn, v0, v1, logits);
}

int
decoder_prefill(struct sotto_state *st, const int32_t *tokens, int n,
    const int *logit_rows, int n_logit_rows, float *logits, char *err)
{
	const struct sotto_model *m = st->model;
	int col0[2] = { 0, n }, i, rc;
	struct decoder_cols cs = { st, &st, col0, 1 };

	if (n < 1 || n > m->hp.n_text_ctx)
		return err_set(err, SOTTO_EINVAL, "prompt of %d tokens does "
		    "not fit the %d-token context", n, m->hp.n_text_ctx);
	if ((rc = decoder_reserve(st, 1, err)) != 0)
		return rc;
	model_use_threads(m);
	embed(st, tokens, n, 0, 0, st->dx);
	for (i = 0; i < n; i++)		/* every layer's positions: beam 0's */
		slot_row(st, 0, 0)[i] = 0;
	for (i = 0; i < m->hp.n_text_layer; i++)
		if ((rc = decoder_layer(&cs, i, n, 1, err)) != 0)
			return rc;
	st->n_kv = n;
	return decoder_logits(st, n, logit_rows, n_logit_rows, logits, err);
}

/* The layers and the head over the columns of cs, then n_kv + 1. */
static int
step_cols(const struct decoder_cols *cs, int n, float *logits, char *err)
{
	const struct sotto_model *m = cs->work->model;
	int cols[WHISPER_MAX_BEAMS], i, b, rc;

	model_use_threads(m);
	/* each column's new position, in every layer: in its beam's slot */
	for (i = 0; i < cs->n_own; i++)
		for (b = 0; b < cs->col0[i + 1] - cs->col0[i]; b++)
			slot_row(cs->own[i], 0, b)[cs->own[i]->n_kv] = b;
	for (i = 0; i < m->hp.n_text_layer; i++)
		if ((rc = decoder_layer(cs, i, n, 0, err)) != 0)
			return rc;
	for (i = 0; i < cs->n_own; i++)
		cs->own[i]->n_kv++;
	for (i = 0; i < n; i++)
		cols[i] = i;
	return decoder_logits(cs->work, n, cols, n, logits, err);
}

int
decoder_step(struct sotto_state *st, const int32_t *tokens, int n_beams,
    float *logits, char *err)
{
	const struct sotto_model *m = st->model;
	int col0[2] = { 0, n_beams };
	struct decoder_cols cs = { st, &st, col0, 1 };

	if (st->n_kv >= m->hp.n_text_ctx)
		return err_set(err, SOTTO_EINVAL, "decoder context full");
	if (n_beams > st->kv_beams || n_beams > WHISPER_MAX_BEAMS)
		return err_set(err, SOTTO_EINVAL, "%d beams without caches",
		    n_beams);
	embed(st, tokens, n_beams, st->n_kv, 1, st->dx);
	return step_cols(&cs, n_beams, logits, err);
}

int
decoder_step_many(struct sotto_state *const *st, const int32_t *tokens,
    int n, float *logits, char *err)
{
	const struct sotto_model *m;
	struct sotto_state *work;
	int col0[WHISPER_MAX_BEAMS + 1], i;
	struct decoder_cols cs;

	if (n < 1 || n > WHISPER_MAX_BEAMS)
		return err_set(err, SOTTO_EINVAL, "%d states in one decoder "
		    "step (1 to %d)", n, WHISPER_MAX_BEAMS);
	work = st[0];
	m = work->model;
	for (i = 0; i < n; i++) {
		if (st[i]->model != m)
			return err_set(err, SOTTO_EINVAL, "states of "
			    "different models in one decoder step");
		if (st[i]->n_kv >= m->hp.n_text_ctx || st[i]->kv_beams < 1)
			return err_set(err, SOTTO_EINVAL, "decoder context "
			    "full or not filled");
		col0[i] = i;
	}
	col0[n] = n;
	/* column i: state i's token at its own position */
	for (i = 0; i < n; i++)
		embed_col(m, tokens[i], st[i]->n_kv, work->dx, n, i);
	cs.work = work;
	cs.own = st;
	cs.col0 = col0;
	cs.n_own = n;
	return step_cols(&cs, n, logits, err);
}

/*
 * After a prefill: every beam starts from beam 0's positions (slot 0),
 * which they share.
 */
int
decoder_fork(struct sotto_state *st, int n_beams)
{
	int b;

	for (b = 1; b < n_beams; b++)
		memcpy(slot_row(st, 0, b), slot_row(st, 0, 0),
		    (size_t)st->n_kv * sizeof(int32_t));
	return 0;
}

/*
 * Beam b continues from beam source[b]: it takes that beam's slots of
 * the positions so far, and writes its next ones into its own slot,
 * where no beam reads them yet. Copying the caches instead (every beam's
 * filled part at each step where one changed) was 2% of a long-form
 * file's time with tiny.en and 5 beams (AVX2 EPYC).
 */
int
decoder_reorder(struct sotto_state *st, const int *source, int n_beams)
{
	size_t bytes = (size_t)st->n_kv * sizeof(int32_t);
	int b;

	for (b = 0; b < n_beams; b++)
		memcpy(slot_row(st, 1, b), slot_row(st, 0, source[b]), bytes);
	for (b = 0; b < n_beams; b++)
		memcpy(slot_row(st, 0, b), slot_row(st, 1, b), bytes);
	return 0;
}
