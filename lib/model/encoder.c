/*
 * The audio encoder in the ANE layout: one static 30 s window,
 * mel [n_mels][3000] in, [d][1500] out, every activation channels-first
 * with rows WHISPER_AUDIO_LD apart.
 *
 * ref: whisper/model.py AudioEncoder, ResidualAttentionBlock,
 * MultiHeadAttention.qkv_attention (non-SDPA path).
 */
#include <math.h>
#include <omp.h>
#include <string.h>

#include "attn-u8.h"
#include "attn-win.h"
#include "err.h"
#include "gemm.h"
#include "layers.h"
#include "model.h"

#define S	WHISPER_N_AUDIO_CTX
#define LD	WHISPER_AUDIO_LD
#define LD1	(2 * LD)	/* conv1's 3000 frames, rows 64-byte aligned */

/*
 * Lay out the three taps of a k=3, padding 1 convolution side by side:
 * out[tap * c + ch][t] = in[ch][t * stride + tap - 1], zero outside, so the
 * convolution becomes one 1x1 product with the [d][3c] weight.
 */
static void
conv_taps(const float *in, int c, int n_in, int ld_in, int stride,
    float *out, int n_out, int ld_out)
{
	int tap, ch, t;

	for (tap = 0; tap < 3; tap++)
		for (ch = 0; ch < c; ch++) {
			const float *src = in + (size_t)ch * ld_in;
			float *dst = out + ((size_t)tap * c + ch) * ld_out;

			for (t = 0; t < n_out; t++) {
				int at = t * stride + tap - 1;

				dst[t] = at >= 0 && at < n_in ? src[at] : 0.0f;
			}
		}
}

/* conv1 + GELU, conv2 (stride 2) + GELU, + positions: st->x [d][1500]. */
static int
encoder_stem(struct sotto_state *st, const float *mel, char *err)
{
	const struct sotto_model *m = st->model;
	int d = m->hp.n_audio_state, rc, i;
	float *y1 = st->ffn;	/* [d][LD1], free until the first MLP */

	conv_taps(mel, m->hp.n_mels, WHISPER_N_FRAMES, WHISPER_N_FRAMES, 1,
	    st->conv_in, WHISPER_N_FRAMES, WHISPER_N_FRAMES);
	if ((rc = gemm_linear(m->gemm, &m->conv1, st->conv_in,
	    WHISPER_N_FRAMES, WHISPER_N_FRAMES, y1, LD1, m->conv1_b,
	    GEMM_GELU, err)) != 0)
		return rc;
	conv_taps(y1, d, WHISPER_N_FRAMES, LD1, 2, st->conv_in, S, LD);
	if ((rc = gemm_linear(m->gemm, &m->conv2, st->conv_in, LD, S, st->x,
	    LD, m->conv2_b, GEMM_GELU, err)) != 0)
		return rc;
	for (i = 0; i < d; i++)
		layer_add(st->x + (size_t)i * LD, m->enc_pos + (size_t)i * S, 1,
		    S, S);
	return 0;
}

/*
 * Per-head attention over the window, a block of queries at a time so the
 * scores of a block ([QBLOCK][1500], 375 KB) stay in cache between the
 * product that writes them, the softmax and the product that reads them.
 * For head h, q, k and v are the row block [h*dh, (h+1)*dh);
 * scores[q][k] = q.k / sqrt(dh), e[q][k] = exp(scores - max over k),
 * out[c][q] = sum_k v[c][k] e[q][k] / sum_k e[q][k]: the softmax's
 * division on the dh outputs of a query rather than its 1500 scores.
 * Each thread takes whole blocks (of any head), its scores its own rows
 * of st->scores and oneDNN's products single-threaded inside: a block's
 * products are small, and splitting each among the threads cost a
 * wait at every one of them.
 */
#define QBLOCK	64

/* Queries [q0, q0 + nq) of head h, in this thread; scores [nq][S]. */
static int
attention_block(struct sotto_state *st, int d, int dh, int h, int q0,
    int nq, float *scores, char *err)
{
	const float *q = st->qkv + (size_t)h * dh * LD;
	const float *k = st->qkv + ((size_t)d + h * dh) * LD;
	const float *v = st->qkv + ((size_t)2 * d + h * dh) * LD;
	float *out = st->attn + (size_t)h * dh * LD + q0, inv[QBLOCK];
	int i, c, rc;

	if ((rc = gemm_f32('T', 'N', nq, S, dh, 1.0f / sqrtf((float)dh),
	    q + q0, LD, k, LD, 0.0f, scores, S, err)) != 0)
		return rc;
	for (i = 0; i < nq; i++)
		inv[i] = 1.0f / layer_exp_sum(scores + (size_t)i * S, S);
	if ((rc = gemm_f32('N', 'T', dh, nq, S, 1.0f, v, LD, scores, S, 0.0f,
	    out, LD, err)) != 0)
		return rc;
	for (c = 0; c < dh; c++)
		for (i = 0; i < nq; i++)
			out[(size_t)c * LD + i] *= inv[i];
	return 0;
}

static int
attention_f32(struct sotto_state *st, int d, int n_head, char *err)
{
	int blocks = (S + QBLOCK - 1) / QBLOCK, tasks = n_head * blocks, t;
	int threads = omp_get_max_threads(), failed = 0;

	/* st->scores holds [S][S]: S / QBLOCK threads' blocks */
	if (threads > S / QBLOCK)
		threads = S / QBLOCK;
#pragma omp parallel for schedule(static) num_threads(threads) \
    reduction(|:failed)
	for (t = 0; t < tasks; t++) {
		int q0 = t % blocks * QBLOCK;
		char terr[SOTTO_ERR_MAX];

		failed |= attention_block(st, d, d / n_head, t / blocks, q0,
		    S - q0 < QBLOCK ? S - q0 : QBLOCK, st->scores +
		    (size_t)omp_get_thread_num() * QBLOCK * S, terr) != 0;
	}
	return failed ? err_set(err, SOTTO_ECOMPUTE, "oneDNN sgemm failed "
	    "in the encoder's attention") : 0;
}

/*
 * The same in bf16: q, k, v and the probabilities rounded to bf16, the
 * products on AMX with f32 accumulation; transposes are stride views.
 * oneDNN's bf16 primitives run one at a time (gemm.h), so the blocks go
 * in turn, each product on all the threads.
 */
#define QBLOCK_BF16	128
static int
attention_bf16(struct sotto_state *st, int d, int n_head, char *err)
{
	struct gemm *g = st->model->gemm;
	int dh = d / n_head, h, q0, nq, i, rc;
	float scale = 1.0f / sqrtf((float)dh);

	/* fold the scale into q before rounding, as the fp32 path does */
#pragma omp parallel for schedule(static)
	for (i = 0; i < 3 * d; i++) {
		float *row = st->qkv + (size_t)i * LD;
		int j;

		if (i < d)
			for (j = 0; j < S; j++)
				row[j] *= scale;
		layer_to_bf16(row, st->qkv16 + (size_t)i * LD, S);
	}
	for (h = 0; h < n_head; h++) {
		const uint16_t *q = st->qkv16 + (size_t)h * dh * LD;
		const uint16_t *k = st->qkv16 + ((size_t)d + h * dh) * LD;
		const uint16_t *v = st->qkv16 + ((size_t)2 * d + h * dh) * LD;

		for (q0 = 0; q0 < S; q0 += nq) {
			nq = S - q0 < QBLOCK_BF16 ? S - q0 : QBLOCK_BF16;
			if ((rc = gemm_bf16(g, nq, S, dh, q + q0, 1, LD, k, LD,
			    1, st->scores, S, err)) != 0)
				return rc;
#pragma omp parallel for schedule(static)
			for (i = 0; i < nq; i++) {
				layer_softmax(st->scores + (size_t)i * S, S);
				layer_to_bf16(st->scores + (size_t)i * S,
				    st->p16 + (size_t)i * S, S);
			}
			if ((rc = gemm_bf16(g, dh, nq, S, v, LD, 1, st->p16, 1,
			    S, st->attn + (size_t)h * dh * LD + q0, LD,
			    err)) != 0)
				return rc;
		}
	}
	return 0;
}

/*
 * Precision int8 on AVX2: from bytes (attn-u8.c), its buffers carved from
 * st->scores ([S][S] floats), which has room for 8 threads' with
 * large-v3's 1280 channels.
 */
static int
attention_u8(struct sotto_state *st, int d, int n_head, char *err)
{
	struct attn_u8 a = { .qkv = st->qkv, .ld = LD, .d = d,
	    .n_head = n_head, .n = S, .out = st->attn, .ldo = LD,
	    .threads = omp_get_max_threads() };

	while (a.threads > 1 && attn_u8_bytes(d, S, n_head, a.threads) >
	    (size_t)S * S * sizeof(float))
		a.threads--;
	return attn_u8_run(&a, st->scores, err);
}

static int
encoder_attention(struct sotto_state *st, int d, int n_head, char *err)
{
	if (st->model->int8_avx2 && attn_u8_fits(d, n_head, S))
		return attention_u8(st, d, n_head, err);
	if (st->attn_win != NULL) {
		int rc = attn_win_set_kv(st->attn_win, 0, st->qkv +
		    (size_t)d * LD, st->qkv + (size_t)2 * d * LD, err);

		return rc != 0 ? rc : attn_win_query(st->attn_win, 0, st->qkv,
		    LD, S, st->attn, LD, err);
	}
	if (st->qkv16 != NULL)
		return attention_bf16(st, d, n_head, err);
	return attention_f32(st, d, n_head, err);
}

static int
encoder_layer(struct sotto_state *st, const struct enc_layer *l, char *err)
{
	const struct sotto_model *m = st->model;
	struct gemm *g = m->gemm;
	int d = m->hp.n_audio_state, rc;

	layer_norm(st->x, st->h, d, S, LD, l->attn_ln_w, l->attn_ln_b);
	if ((rc = gemm_linear(g, &l->qkv, st->h, LD, S, st->qkv, LD, l->qkv_b,
	    0, err)) != 0 ||
	    (rc = encoder_attention(st, d, m->hp.n_audio_head, err)) != 0 ||
	    (rc = gemm_linear(g, &l->o, st->attn, LD, S, st->x, LD, l->o_b,
	    GEMM_ACCUMULATE, err)) != 0)
		return rc;
	layer_norm(st->x, st->h, d, S, LD, l->mlp_ln_w, l->mlp_ln_b);
	return gemm_mlp(g, &l->fc1, l->fc1_b, &l->fc2, l->fc2_b, st->h, LD, S,
	    st->x, LD, st->ffn, LD, err);
}

int
encoder_forward(struct sotto_state *st, const float *mel, char *err)
{
	const struct sotto_model *m = st->model;
	int i, rc;

	model_use_threads(m);
	if ((rc = encoder_stem(st, mel, err)) != 0)
		return rc;
	for (i = 0; i < m->hp.n_audio_layer; i++)
		if ((rc = encoder_layer(st, &m->enc[i], err)) != 0)
			return rc;
	layer_norm(st->x, st->enc_out, m->hp.n_audio_state, S, LD,
	    m->ln_post_w, m->ln_post_b);
	if ((rc = decoder_cross_kv(st, err)) != 0)
		return rc;
	return 0;
}
