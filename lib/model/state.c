/*
 * Per-stream state: every buffer a window needs, allocated once, each its
 * own mapping (bigmem.h), so the memory goes back when the state does.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "attn-win.h"
#include "bigmem.h"
#include "gemm.h"
#include "model.h"
#include "logits.h"
#include "mel.h"

static float *
buf(size_t n, int *failed)
{
	float *p = bigmem_alloc(n * sizeof(float));

	if (p == NULL)
		*failed = 1;
	return p;
}

struct sotto_state *
sotto_state_new(const struct sotto_model *m)
{
	const struct hparams *hp = &m->hp;
	size_t da = hp->n_audio_state, dt = hp->n_text_state;
	size_t na = WHISPER_N_AUDIO_CTX, ld = WHISPER_AUDIO_LD;
	size_t ctx = hp->n_text_ctx;
	size_t taps = 3 * (hp->n_mels * (size_t)WHISPER_N_FRAMES > da * ld ?
	    hp->n_mels * (size_t)WHISPER_N_FRAMES : da * ld);
	struct sotto_state *st;
	int failed = 0;

	model_use_all_threads(m);	/* the buffers per thread below */
	if ((st = calloc(1, sizeof(*st))) == NULL)
		return NULL;
	st->model = m;
	st->conv_in = buf(taps, &failed);
	st->x = buf(da * ld, &failed);
	st->h = buf(da * ld, &failed);
	st->qkv = buf(3 * da * ld, &failed);
	st->attn = buf(da * ld, &failed);
	/* conv1's output [d][3000] lives here too */
	st->ffn = buf(4 * da * ld, &failed);
	st->enc_out = buf(da * ld, &failed);
	/*
	 * bf16 models attend on AMX or by AVX512-BF16 dot products
	 * (attn-win.h); fp32 models, and heads other than 64 wide, by
	 * composed products over a [1500][1500] score matrix.
	 */
	if (m->precision == SOTTO_PRECISION_BF16) {
		int amx = gemm_has_amx(m->gemm);

		if (attn_win_new((int)da, hp->n_audio_head, 1, (int)na, amx,
		    &st->attn_win, st->err) != 0)
			st->attn_win = NULL;
		if (attn_win_new((int)dt, hp->n_text_head, hp->n_text_layer,
		    (int)ctx, amx, &st->cross_win, st->err) != 0)
			st->cross_win = NULL;
	}
	if (st->attn_win == NULL) {
		st->scores = buf(na * na, &failed);
		if (m->precision == SOTTO_PRECISION_BF16) {
			st->qkv16 = (uint16_t *)buf((3 * da * ld + 1) / 2,
			    &failed);
			st->p16 = (uint16_t *)buf((na * na + 1) / 2, &failed);
		}
	}
	/* floats, or binary16 in precision int8 on AVX2 (decoder-cross.c) */
	if (st->cross_win == NULL)
		st->cross_kv = buf((size_t)hp->n_text_layer * 2 * dt * ld /
		    (m->int8_avx2 ? 2 : 1), &failed);
	st->dx = buf(dt * ctx, &failed);
	st->dh = buf(dt * ctx, &failed);
	st->dqkv = buf(3 * dt * ctx, &failed);
	st->dattn = buf(dt * ctx, &failed);
	st->dffn = buf(4 * dt * ctx, &failed);
	st->dscores = buf(ctx * na, &failed);
	st->kv_slot = (int32_t *)buf(2 * WHISPER_MAX_BEAMS * ctx, &failed);
	st->logits = buf((size_t)WHISPER_MAX_BEAMS * hp->n_vocab, &failed);
	st->logprobs = buf(hp->n_vocab, &failed);
	if (m->head != NULL)
		st->head_x = (int8_t *)buf(LOGITS_SCRATCH(dt) / 4, &failed);
	st->mel_window = buf((size_t)hp->n_mels * WHISPER_N_FRAMES, &failed);
	if (failed || mel_new(hp->n_mels, m->mel_filters, &st->mel,
	    NULL) != 0) {
		sotto_state_free(st);
		return NULL;
	}
	model_use_threads(m);	/* the stream's mel next: the share again */
	return st;
}

void
sotto_state_free(struct sotto_state *st)
{
	if (st == NULL)
		return;
	mel_free(st->mel);
	bigmem_free(st->conv_in);
	bigmem_free(st->x);
	bigmem_free(st->h);
	bigmem_free(st->qkv);
	bigmem_free(st->attn);
	bigmem_free(st->ffn);
	bigmem_free(st->scores);
	bigmem_free(st->enc_out);
	bigmem_free(st->qkv16);
	bigmem_free(st->p16);
	attn_win_free(st->attn_win);
	attn_win_free(st->cross_win);
	bigmem_free(st->cross_kv);
	bigmem_free(st->kv);
	bigmem_free(st->kv_slot);
	bigmem_free(st->dx);
	bigmem_free(st->dh);
	bigmem_free(st->dqkv);
	bigmem_free(st->dattn);
	bigmem_free(st->dffn);
	bigmem_free(st->dscores);
	bigmem_free(st->logits);
	bigmem_free(st->logprobs);
	bigmem_free(st->head_x);
	bigmem_free(st->mel_window);
	free(st);
}

int
sotto_encode(struct sotto_state *st, const float *mel, float *out, char *err)
{
	const struct hparams *hp = &st->model->hp;
	int rc, i;

	if ((rc = encoder_forward(st, mel, err)) != 0)
		return rc;
	for (i = 0; out != NULL && i < hp->n_audio_state; i++)
		memcpy(out + (size_t)i * WHISPER_N_AUDIO_CTX, st->enc_out +
		    (size_t)i * WHISPER_AUDIO_LD, WHISPER_N_AUDIO_CTX *
		    sizeof(float));
	return 0;
}

int
sotto_log_mel(const struct sotto_model *m, const float *pcm, size_t n,
    float *out, size_t n_frames, char *err)
{
	struct mel *mel;
	float max = -10.0f;
	int rc;

	if (n_frames > mel_total_frames(n, 0))
		return err_set(err, SOTTO_EINVAL, "%zu frames asked of %zu "
		    "samples", n_frames, n);
	model_use_threads(m);
	if ((rc = mel_new(m->hp.n_mels, m->mel_filters, &mel, err)) != 0)
		return rc;
	rc = mel_log(mel, pcm, n, 0, 0, n_frames, out, n_frames, &max, err);
	mel_free(mel);
	if (rc == 0)
		mel_normalize(out, m->hp.n_mels, n_frames, n_frames, max);
	return rc;
}

int
sotto_decode_logits(struct sotto_state *st, const int32_t *tokens, int n,
    int n_prompt, float *logits, char *err)
{
	const struct hparams *hp = &st->model->hp;
	size_t nv = hp->n_vocab;
	int row, i, rc;

	if (n_prompt < 1 || n < n_prompt || n > hp->n_text_ctx)
		return err_set(err, SOTTO_EINVAL, "%d tokens with a prompt of "
		    "%d: need 1 <= prompt <= tokens <= %d", n, n_prompt,
		    hp->n_text_ctx);
	for (i = 0; i < n; i++)
		if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
			return err_set(err, SOTTO_EINVAL, "token %d is not "
			    "below n_vocab %d", tokens[i], hp->n_vocab);
	row = n_prompt - 1;
	if ((rc = decoder_prefill(st, tokens, n_prompt, &row, 1, logits,
	    err)) != 0)
		return rc;
	for (i = n_prompt; i < n; i++)
		if ((rc = decoder_step(st, tokens + i, 1, logits +
		    (size_t)(i - n_prompt + 1) * nv, err)) != 0)
			return rc;
	return 0;
}
