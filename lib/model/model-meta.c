/*
 * A model's metadata: hyper-parameters (checked for the shapes the engine
 * supports), the tokenizer and the suppress lists (docs/model-format.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gguf.h"
#include "layers.h"
#include "model.h"
#include "tokenizer.h"

struct hparam_key {
	const char *key;
	size_t offset;
	uint32_t min, max;
};

#define HP(name, lo, hi) \
	{ "whisper." #name, offsetof(struct hparams, name), lo, hi }

static const struct hparam_key hparam_keys[] = {
	HP(n_mels, 80, 128),
	HP(n_audio_ctx, WHISPER_N_AUDIO_CTX, WHISPER_N_AUDIO_CTX),
	HP(n_audio_state, 64, 8192),
	HP(n_audio_head, 1, 128),
	HP(n_audio_layer, 1, 128),
	HP(n_text_ctx, 8, 448),
	HP(n_text_state, 64, 8192),
	HP(n_text_head, 1, 128),
	HP(n_text_layer, 1, 128),
	HP(n_vocab, 1000, 1 << 20),
};

static int
read_hparams(struct sotto_model *m, char *err)
{
	const char *path = gguf_path(m->gguf);
	struct hparams *hp = &m->hp;
	uint32_t v;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(hparam_keys) / sizeof(hparam_keys[0]); i++) {
		const struct hparam_key *k = &hparam_keys[i];

		if ((rc = gguf_get_u32(m->gguf, k->key, &v, err)) != 0)
			return rc;
		if (v < k->min || v > k->max)
			return err_set(err, SOTTO_EFORMAT, "%s: %s = %u is "
			    "outside %u..%u", path, k->key, v, k->min, k->max);
		*(int *)((char *)hp + k->offset) = (int)v;
	}
	if (hp->n_mels != 80 && hp->n_mels != 128)
		return err_set(err, SOTTO_EFORMAT, "%s: n_mels must be 80 or "
		    "128, not %d", path, hp->n_mels);
	if (hp->n_audio_state % hp->n_audio_head != 0 ||
	    hp->n_text_state % hp->n_text_head != 0)
		return err_set(err, SOTTO_EFORMAT, "%s: the state width is "
		    "not a multiple of the number of heads", path);
	if (hp->n_text_state / hp->n_text_head > LAYER_DH_MAX)
		return err_set(err, SOTTO_EFORMAT, "%s: decoder heads of %d "
		    "channels (at most %d)", path, hp->n_text_state /
		    hp->n_text_head, LAYER_DH_MAX);
	return 0;
}

static int
read_name(struct sotto_model *m, char *err)
{
	struct gguf_str s;
	int rc;

	if ((rc = gguf_get_str(m->gguf, "general.architecture", &s, err)))
		return rc;
	if (s.len != 7 || memcmp(s.ptr, "whisper", 7) != 0)
		return err_set(err, SOTTO_EFORMAT, "%s: not a Whisper model "
		    "(architecture \"%.*s\")", gguf_path(m->gguf),
		    (int)(s.len > 32 ? 32 : s.len), s.ptr);
	if (gguf_get_str(m->gguf, "general.name", &s, NULL) != 0)
		s = (struct gguf_str){ "whisper", 7 };
	snprintf(m->name, sizeof(m->name), "%.*s",
	    (int)(s.len > sizeof(m->name) - 1 ? sizeof(m->name) - 1 : s.len),
	    s.ptr);
	return 0;
}

static const struct {
	const char *key;
	size_t offset;
} special_keys[] = {
	{ "whisper.token.eot", offsetof(struct tok_specials, eot) },
	{ "whisper.token.sot", offsetof(struct tok_specials, sot) },
	{ "whisper.token.translate", offsetof(struct tok_specials, translate) },
	{ "whisper.token.transcribe",
	    offsetof(struct tok_specials, transcribe) },
	{ "whisper.token.sot_lm", offsetof(struct tok_specials, sot_lm) },
	{ "whisper.token.sot_prev", offsetof(struct tok_specials, sot_prev) },
	{ "whisper.token.no_speech", offsetof(struct tok_specials, no_speech) },
	{ "whisper.token.no_timestamps",
	    offsetof(struct tok_specials, no_timestamps) },
	{ "whisper.token.timestamp_begin",
	    offsetof(struct tok_specials, timestamp_begin) },
};

static int
read_specials(struct sotto_model *m, struct tok_specials *sp, char *err)
{
	uint32_t v;
	size_t i;
	int rc;

	for (i = 0; i < sizeof(special_keys) / sizeof(special_keys[0]); i++) {
		if ((rc = gguf_get_u32(m->gguf, special_keys[i].key, &v,
		    err)) != 0)
			return rc;
		if (v >= (uint32_t)m->hp.n_vocab)
			return err_set(err, SOTTO_EFORMAT, "%s: %s = %u is "
			    "not below n_vocab %d", gguf_path(m->gguf),
			    special_keys[i].key, v, m->hp.n_vocab);
		*(int32_t *)((char *)sp + special_keys[i].offset) = (int32_t)v;
	}
	if (sp->timestamp_begin + 1500 >= m->hp.n_vocab)
		return err_set(err, SOTTO_EFORMAT, "%s: the vocabulary has "
		    "no room for 1501 timestamp tokens", gguf_path(m->gguf));
	return 0;
}

static int
read_tokenizer(struct sotto_model *m, char *err)
{
	struct gguf_str *tokens = NULL, *langs = NULL;
	struct tok_piece *pieces = NULL, *lpieces = NULL;
	struct tok_specials sp;
	size_t n_tokens, n_langs = 0, i;
	uint32_t n_bpe;
	int rc;

	if ((rc = read_specials(m, &sp, err)) != 0 ||
	    (rc = gguf_get_u32(m->gguf, "whisper.tokenizer.n_bpe", &n_bpe,
	    err)) != 0 ||
	    (rc = gguf_get_str_array(m->gguf, "whisper.tokenizer.tokens",
	    &tokens, &n_tokens, err)) != 0 ||
	    (rc = gguf_get_str_array(m->gguf, "whisper.languages", &langs,
	    &n_langs, err)) != 0)
		goto out;
	if (n_tokens != (size_t)m->hp.n_vocab) {
		rc = err_set(err, SOTTO_EFORMAT, "%s: %zu tokens for n_vocab "
		    "%d", gguf_path(m->gguf), n_tokens, m->hp.n_vocab);
		goto out;
	}
	pieces = calloc(n_tokens, sizeof(*pieces));
	lpieces = calloc(n_langs + 1, sizeof(*lpieces));
	if (pieces == NULL || lpieces == NULL) {
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < n_tokens; i++)
		pieces[i] = (struct tok_piece){ tokens[i].ptr, tokens[i].len };
	for (i = 0; i < n_langs; i++)
		lpieces[i] = (struct tok_piece){ langs[i].ptr, langs[i].len };
	rc = tok_new(pieces, (int)n_tokens, (int)n_bpe, &sp, lpieces,
	    (int)n_langs, &m->tok, err);
	m->multilingual = n_langs > 0;
out:
	free(tokens);
	free(langs);
	free(pieces);
	free(lpieces);
	return rc;
}

static int
read_suppress(struct sotto_model *m, char *err)
{
	size_t i;
	int rc;

	if ((rc = gguf_get_i32_array(m->gguf, "whisper.suppress_tokens",
	    &m->suppress, &m->n_suppress, err)) != 0 ||
	    (rc = gguf_get_i32_array(m->gguf, "whisper.suppress_begin",
	    &m->suppress_begin, &m->n_suppress_begin, err)) != 0)
		return rc;
	for (i = 0; i < m->n_suppress; i++)
		if (m->suppress[i] < 0 || m->suppress[i] >= m->hp.n_vocab)
			return err_set(err, SOTTO_EFORMAT, "%s: suppressed "
			    "token %d out of range", gguf_path(m->gguf),
			    m->suppress[i]);
	for (i = 0; i < m->n_suppress_begin; i++)
		if (m->suppress_begin[i] < 0 ||
		    m->suppress_begin[i] >= m->hp.n_vocab)
			return err_set(err, SOTTO_EFORMAT, "%s: suppressed "
			    "token %d out of range", gguf_path(m->gguf),
			    m->suppress_begin[i]);
	return 0;
}

/*
 * The cross-attention heads word timing reads: the file's
 * whisper.alignment_heads, or, in a file without them, every head of
 * the last half of the decoder layers (openai's default for a model
 * without tuned heads; docs/model-format.md).
 */
static int
read_align_heads(struct sotto_model *m, char *err)
{
	const struct hparams *hp = &m->hp;
	size_t n, i;
	int rc, l, h;

	if (!gguf_has_key(m->gguf, "whisper.alignment_heads")) {
		n = (size_t)(hp->n_text_layer - hp->n_text_layer / 2) *
		    hp->n_text_head;
		if ((m->align_heads = malloc(2 * n * sizeof(int32_t))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		for (i = 0, l = hp->n_text_layer / 2; l < hp->n_text_layer; l++)
			for (h = 0; h < hp->n_text_head; h++, i++) {
				m->align_heads[2 * i] = l;
				m->align_heads[2 * i + 1] = h;
			}
		m->n_align_heads = (int)n;
		return 0;
	}
	if ((rc = gguf_get_i32_array(m->gguf, "whisper.alignment_heads",
	    &m->align_heads, &n, err)) != 0)
		return rc;
	if (n == 0 || n % 2 != 0)
		return err_set(err, SOTTO_EFORMAT, "%s: whisper.alignment_heads "
		    "has %zu values, not (layer, head) pairs", gguf_path(m->gguf),
		    n);
	for (i = 0; i < n; i += 2)
		if (m->align_heads[i] < 0 || m->align_heads[i] >=
		    hp->n_text_layer || m->align_heads[i + 1] < 0 ||
		    m->align_heads[i + 1] >= hp->n_text_head)
			return err_set(err, SOTTO_EFORMAT, "%s: alignment head "
			    "(%d, %d) is not in the decoder's %d x %d",
			    gguf_path(m->gguf), m->align_heads[i],
			    m->align_heads[i + 1], hp->n_text_layer,
			    hp->n_text_head);
	m->n_align_heads = (int)(n / 2);
	return 0;
}

int
model_read_meta(struct sotto_model *m, char *err)
{
	int rc;

	if ((rc = read_name(m, err)) != 0 ||
	    (rc = read_hparams(m, err)) != 0 ||
	    (rc = read_tokenizer(m, err)) != 0 ||
	    (rc = read_suppress(m, err)) != 0 ||
	    (rc = read_align_heads(m, err)) != 0)
		return rc;
	return 0;
}
