/*
 * The decoder's cross-attention over the window (decoder.c runs the
 * rest of each layer): the keys and values of every layer, computed once
 * per window from the encoder output, and each pass's queries against
 * them, by the window kernels (attn-win.h) in bf16 or by composed
 * products in fp32. A word alignment's tap (struct dec_tap) gets the
 * scores of the heads it wants from a prefill.
 *
 * ref: whisper/model.py ResidualAttentionBlock (cross_attn).
 */
#include <math.h>
#include <omp.h>

#include "attn-win.h"
#include "decoder-cross.h"
#include "gemm.h"
#include "layers.h"
#include "model.h"

#define NA	WHISPER_N_AUDIO_CTX
#define LD	WHISPER_AUDIO_LD

_Static_assert(WHISPER_MAX_BEAMS <= LAYER_ATTEND_MAX_Q,
    "layer_attend takes every beam of a step");

/*
 * Keys and values in binary16 (precision int8 on AVX2): a step's
 * cross-attention reads every layer's, and they were a third of tiny.en's
 * greedy step there in f32.
 */
static int
cross_f16(const struct sotto_state *st)
{
	return st->model->int8_avx2;
}

/* Keys (kind 0) or values (1) of layer: float, or binary16 (cross_f16). */
static void *
cross_at(const struct sotto_state *st, int layer, int kind)
{
	size_t plane = (size_t)st->model->hp.n_text_state * LD;

	return (char *)st->cross_kv + ((size_t)layer * 2 + kind) * plane *
	    (cross_f16(st) ? 2 : 4);
}

/*
 * Rows [c0, c0 + rows) of the keys or values of layer as floats: the
 * f32 ones where they are, binary16 ones widened into buf.
 */
static const float *
cross_rows(const struct sotto_state *st, int layer, int kind, int c0,
    int rows, float *buf)
{
	if (!cross_f16(st))
		return (const float *)cross_at(st, layer, kind) + (size_t)c0 *
		    LD;
	layer_from_f16((const uint16_t *)cross_at(st, layer, kind) +
	    (size_t)c0 * LD, buf, (size_t)rows * LD);
	return buf;
}

/* Cross-attention K/V of every layer from the encoder output, per window. */
int
decoder_cross_kv(struct sotto_state *st, char *err)
{
	const struct sotto_model *m = st->model;
	size_t plane = (size_t)m->hp.n_text_state * LD;
	int i, rc;

	for (i = 0; i < m->hp.n_text_layer; i++) {
		/* bf16 and f16: through the encoder's q; k; v scratch */
		float *kv = st->cross_win != NULL || cross_f16(st) ? st->qkv :
		    cross_at(st, i, 0);

		if ((rc = gemm_linear(m->gemm, &m->dec[i].ckv, st->enc_out, LD,
		    NA, kv, LD, m->dec[i].ckv_b, 0, err)) != 0)
			return rc;
		if (st->cross_win != NULL && (rc = attn_win_set_kv(
		    st->cross_win, i, kv, kv + plane, err)) != 0)
			return rc;
		if (st->cross_win == NULL && cross_f16(st))
			layer_to_f16(kv, cross_at(st, i, 0), 2 * plane);
	}
	return 0;
}

/*
 * Cross-attention of n columns (tokens or beams) over the window. A few
 * columns (a cached step) go one by one through a vector kernel: small
 * sgemm calls cost more in dispatch than in arithmetic.
 */
static int
cross_attn_own(struct sotto_state *work, struct sotto_state *st, int layer,
    int n, int c0, int nq, char *err)
{
	const struct sotto_model *m = st->model;
	int d = m->hp.n_text_state, dh = d / m->hp.n_text_head, h, i, rc;
	float scale = 1.0f / sqrtf((float)dh);
	const float *k, *v;

	if (st->cross_win != NULL)
		return attn_win_query(st->cross_win, layer, work->dqkv + c0, n,
		    nq, work->dattn + c0, n, err);
	if (nq <= WHISPER_MAX_BEAMS) {
		/*
		 * The heads shared among the threads (K and V of a layer,
		 * 2-4 MB in f32, come from memory at every step); thread t
		 * has scores at dscores + t * MAX_BEAMS * NA: dscores has
		 * room for 28 threads, and there are at most 20 heads.
		 */
		int nt = omp_get_max_threads() < m->hp.n_text_head ?
		    omp_get_max_threads() : m->hp.n_text_head;

#pragma omp parallel for schedule(static) num_threads(nt)
		for (h = 0; h < m->hp.n_text_head; h++) {
			float *p = work->dscores + (size_t)omp_get_thread_num() *
			    WHISPER_MAX_BEAMS * NA;
			size_t at = (size_t)h * dh * LD;

			if (cross_f16(st))
				layer_attend_f16(work->dqkv + (size_t)h * dh *
				    n + c0, n, nq, (const uint16_t *)cross_at(
				    st, layer, 0) + at, (const uint16_t *)
				    cross_at(st, layer, 1) + at, LD, NA, dh,
				    scale, work->dattn + (size_t)h * dh * n +
				    c0, n, p);
			else
				layer_attend(work->dqkv + (size_t)h * dh * n +
				    c0, n, nq, (const float *)cross_at(st,
				    layer, 0) + at, (const float *)cross_at(st,
				    layer, 1) + at, LD, NA, dh, scale,
				    work->dattn + (size_t)h * dh * n + c0, n,
				    p);
		}
		return 0;
	}
	/* a prompt: one state, all columns; binary16 widened in st->qkv */
	for (h = 0; h < m->hp.n_text_head; h++) {
		k = cross_rows(st, layer, 0, h * dh, dh, st->qkv);
		v = cross_rows(st, layer, 1, h * dh, dh, st->qkv + (size_t)dh *
		    LD);
		if ((rc = gemm_f32('T', 'N', n, NA, dh, scale,
		    work->dqkv + (size_t)h * dh * n, n, k, LD, 0.0f,
		    work->dscores, NA, err)) != 0)
			return rc;
		for (i = 0; i < n; i++)
			layer_softmax(work->dscores + (size_t)i * NA, NA);
		if ((rc = gemm_f32('N', 'T', dh, n, NA, 1.0f, v, LD,
		    work->dscores, NA, 0.0f, work->dattn + (size_t)h * dh * n,
		    n, err)) != 0)
			return rc;
	}
	return 0;
}

int
decoder_cross_attn(const struct decoder_cols *cs, int layer, int n, char *err)
{
	int o, rc;

	for (o = 0; o < cs->n_own; o++)
		if ((rc = cross_attn_own(cs->work, cs->own[o], layer, n,
		    cs->col0[o], cs->col0[o + 1] - cs->col0[o], err)) != 0)
			return rc;
	return 0;
}

/*
 * A prefill's scores for st->tap, fp32: q_j . k of the heads it wants,
 * one product each (the attention's own are in scratch it reuses).
 */
static int
tap_scores_f32(struct sotto_state *st, int layer, int n, char *err)
{
	const struct sotto_model *m = st->model;
	const struct dec_tap *tap = st->tap;
	int d = m->hp.n_text_state, dh = d / m->hp.n_text_head, h, s, rc;
	const float *k;

	for (h = 0; h < m->hp.n_text_head; h++) {
		if ((s = tap->slot[layer * m->hp.n_text_head + h]) < 0)
			continue;
		k = cross_rows(st, layer, 0, h * dh, dh, st->qkv);
		if ((rc = gemm_f32('T', 'N', n, tap->n_keys, dh,
		    1.0f / sqrtf((float)dh), st->dqkv + (size_t)h * dh * n, n,
		    k, LD, 0.0f, tap->buf +
		    (size_t)s * n * tap->n_keys, tap->n_keys, err)) != 0)
			return rc;
	}
	return 0;
}

/* Whether st->tap wants a head of layer. */
static int
tap_wants(const struct sotto_state *st, int layer)
{
	int h, n_head = st->model->hp.n_text_head;

	if (st->tap == NULL)
		return 0;
	for (h = 0; h < n_head; h++)
		if (st->tap->slot[layer * n_head + h] >= 0)
			return 1;
	return 0;
}

/*
 * A prefill's cross-attention; with a tap, the scores of the heads it
 * wants are handed to it (bf16: kept by the window kernel as it goes).
 */
int
decoder_cross_prefill(struct sotto_state *st, int layer, int n, char *err)
{
	const struct sotto_model *m = st->model;
	struct attn_keep keep;
	int rc;

	if (!tap_wants(st, layer))
		return cross_attn_own(st, st, layer, n, 0, n, err);
	if (st->cross_win != NULL) {
		keep.slot = st->tap->slot + layer * m->hp.n_text_head;
		keep.out = st->tap->buf;
		keep.n_keys = st->tap->n_keys;
		rc = attn_win_query_keep(st->cross_win, layer, st->dqkv, n, n,
		    st->dattn, n, &keep, err);
	} else if ((rc = cross_attn_own(st, st, layer, n, 0, n, err)) == 0)
		rc = tap_scores_f32(st, layer, n, err);
	if (rc == 0)
		st->tap->fold(st->tap, layer, n);
	return rc;
}
