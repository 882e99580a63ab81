/*
 * Cutting a decoded window into timed segments and keeping the token
 * history that conditions the next window.
 *
 * ref: whisper/transcribe.py, the body of the seek loop after
 * decode_with_fallback().
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tokenizer.h"
#include "transcribe.h"

#define TIME_PRECISION	0.02	/* seconds per timestamp token */
#define INPUT_STRIDE	2	/* mel frames per timestamp token */

static int
tokens_append(struct run *r, const int32_t *t, int n, char *err)
{
	int32_t *p;
	int cap;

	if (r->n_tokens + n > r->cap_tokens) {
		cap = r->cap_tokens ? r->cap_tokens : 1024;
		while (cap < r->n_tokens + n)
			cap *= 2;
		if ((p = realloc(r->tokens, cap * sizeof(*p))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		r->tokens = p;
		r->cap_tokens = cap;
	}
	memcpy(r->tokens + r->n_tokens, t, n * sizeof(*t));
	r->n_tokens += n;
	return 0;
}

static int
blank(const char *s)
{
	while (*s != '\0' && isspace((unsigned char)*s))
		s++;
	return *s == '\0';
}

static int
result_grow(struct sotto_result *res, char *err)
{
	struct sotto_segment *p;

	if ((res->n_segments & (res->n_segments - 1)) == 0) {
		p = realloc(res->segments, (res->n_segments ?
		    2 * res->n_segments : 1) * sizeof(*p));
		if (p == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		res->segments = p;
	}
	return 0;
}

/*
 * A segment of tokens[n]; one that is instantaneous or has no text is
 * dropped (openai blanks it), and only kept segments extend the prompt.
 */
static int
segment_add(const struct sotto_model *m, struct run *r, const int32_t *tok,
    int n, double start, double end, const struct decode_result *d,
    char *err)
{
	struct sotto_segment *s;
	char *text;
	int rc;

	if ((rc = tok_decode(m->tok, tok, n, &text, err)) != 0)
		return rc;
	if (start == end || blank(text)) {
		free(text);
		return 0;
	}
	if ((rc = result_grow(r->res, err)) != 0 ||
	    (rc = tokens_append(r, tok, n, err)) != 0) {
		free(text);
		return rc;
	}
	s = &r->res->segments[r->res->n_segments++];
	memset(s, 0, sizeof(*s));
	s->start = start;
	s->end = end;
	s->text = text;
	s->avg_logprob = d->avg_logprob;
	s->no_speech_prob = d->no_speech_prob;
	s->temperature = d->temperature;
	s->compression_ratio = d->compression_ratio;
	if ((s->tokens = malloc((n ? n : 1) * sizeof(int32_t))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memcpy(s->tokens, tok, n * sizeof(int32_t));
	s->n_tokens = n;
	return 0;
}

/* No pair of timestamps: one segment up to the last timestamp, if any. */
static int
add_whole(const struct sotto_model *m, struct run *r,
    const struct decode_result *d, size_t size, double offset, char *err)
{
	int32_t tb = tok_specials(m->tok)->timestamp_begin;
	double duration = size * (double)WHISPER_HOP / SOTTO_SAMPLE_RATE;
	int i;

	for (i = d->n_tokens - 1; i >= 0; i--)
		if (d->tokens[i] >= tb) {
			if (d->tokens[i] != tb)
				duration = (d->tokens[i] - tb) *
				    TIME_PRECISION;
			break;
		}
	r->seek += size;
	return segment_add(m, r, d->tokens, d->n_tokens, offset,
	    offset + duration, d, err);
}

int
segments_add(struct run *r, const struct decode_result *d, size_t size,
    char *err)
{
	const struct sotto_model *m = r->model;
	int32_t tb = tok_specials(m->tok)->timestamp_begin;
	const int32_t *t = d->tokens;
	double offset = r->seek * (double)WHISPER_HOP / SOTTO_SAMPLE_RATE;
	int n = d->n_tokens, single_end, last = 0, i, rc, cut = 0;

	single_end = n >= 2 && t[n - 2] < tb && t[n - 1] >= tb;
	for (i = 1; i < n; i++) {
		if (!(t[i - 1] >= tb && t[i] >= tb))
			continue;
		cut = 1;
		if ((rc = segment_add(m, r, t + last, i - last, offset +
		    (t[last] - tb) * TIME_PRECISION, offset +
		    (t[i - 1] - tb) * TIME_PRECISION, d, err)) != 0)
			return rc;
		last = i;
	}
	if (!cut)
		return add_whole(m, r, d, size, offset, err);
	if (single_end) {
		if ((rc = segment_add(m, r, t + last, n - last, offset +
		    (t[last] - tb) * TIME_PRECISION, offset +
		    (t[n - 1] - tb) * TIME_PRECISION, d, err)) != 0)
			return rc;
		r->seek += size;
	} else
		r->seek += (size_t)(t[last - 1] - tb) * INPUT_STRIDE;
	return 0;
}

int
prompt_init(struct run *r, const char *text, char *err)
{
	int32_t *ids;
	char *spaced;
	int n, rc;

	while (*text != '\0' && isspace((unsigned char)*text))
		text++;
	if ((spaced = malloc(strlen(text) + 2)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	spaced[0] = ' ';
	strcpy(spaced + 1, text);
	for (n = (int)strlen(spaced); n > 1 &&
	    isspace((unsigned char)spaced[n - 1]); n--)
		spaced[n - 1] = '\0';
	rc = tok_encode(r->model->tok, spaced, &ids, &n, err);
	free(spaced);
	if (rc != 0)
		return rc;
	rc = tokens_append(r, ids, n, err);
	free(ids);
	return rc;
}

int
result_set_language(struct run *r, char *err)
{
	const char *code = r->language >= 0 ?
	    tok_language_code(r->model->tok, r->language) : "en";

	if ((r->res->language = strdup(code != NULL ? code : "en")) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	r->res->language_prob = r->language_prob;
	return 0;
}

void
sotto_result_free(struct sotto_result *res)
{
	int i;

	if (res == NULL)
		return;
	for (i = 0; i < res->n_segments; i++) {
		free(res->segments[i].text);
		free(res->segments[i].tokens);
	}
	free(res->segments);
	free(res->language);
	free(res);
}
