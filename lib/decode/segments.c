/*
 * Cutting a decoded window into timed segments and keeping the token
 * history that conditions the next window.
 *
 * ref: whisper/transcribe.py, the body of the seek loop after
 * decode_with_fallback().
 */
#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
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

static double
clamp_time(double t, double limit)
{
	return t > limit ? limit : t;
}

void
segment_clamp(struct sotto_segment *s, double limit)
{
	int i;

	s->start = clamp_time(s->start, limit);
	s->end = clamp_time(s->end, limit);
	for (i = 0; i < s->n_words; i++) {
		s->words[i].start = clamp_time(s->words[i].start, limit);
		s->words[i].end = clamp_time(s->words[i].end, limit);
	}
}

/*
 * A cut of the window kept as a segment, with its words if any; one that
 * is instantaneous or has no text is dropped (openai blanks it), and
 * only kept segments extend the prompt.
 */
static int
segment_add(const struct sotto_model *m, struct run *r, struct align_seg *c,
    const struct decode_result *d, char *err)
{
	struct sotto_segment *s;
	char *text;
	int rc;

	if ((rc = tok_decode(m->tok, c->tokens, c->n_tokens, &text,
	    err)) != 0)
		return rc;
	if (c->start == c->end || blank(text)) {
		free(text);
		return 0;
	}
	if ((rc = result_grow(r->res, err)) != 0 ||
	    (rc = tokens_append(r, c->tokens, c->n_tokens, err)) != 0) {
		free(text);
		return rc;
	}
	s = &r->res->segments[r->res->n_segments++];
	memset(s, 0, sizeof(*s));
	s->start = c->start;
	s->end = c->end;
	s->text = text;
	s->avg_logprob = d->avg_logprob;
	s->no_speech_prob = d->no_speech_prob;
	s->temperature = d->temperature;
	s->compression_ratio = d->compression_ratio;
	s->words = c->words;
	s->n_words = c->n_words;
	c->words = NULL;
	/* with word timestamps every segment has words, if none */
	if (r->params->word_timestamps && s->words == NULL &&
	    (s->words = calloc(1, sizeof(*s->words))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	segment_clamp(s, (double)r->n / SOTTO_SAMPLE_RATE);
	if ((s->tokens = malloc((c->n_tokens ? c->n_tokens : 1) *
	    sizeof(int32_t))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memcpy(s->tokens, c->tokens, c->n_tokens * sizeof(int32_t));
	s->n_tokens = c->n_tokens;
	return 0;
}

/* One window's cuts and where the seek goes after it. */
struct cuts {
	struct align_seg c[DECODE_SAMPLE_LEN + 1];
	int n;
	int single_end;		/* the tokens end with one timestamp */
	size_t seek;
};

static void
cut(struct cuts *w, const int32_t *t, int n, double start, double end)
{
	struct align_seg *c = &w->c[w->n++];

	memset(c, 0, sizeof(*c));
	c->tokens = t;
	c->n_tokens = n;
	c->start = start;
	c->end = end;
}

/* No pair of timestamps: one segment up to the last timestamp, if any. */
static void
cut_whole(const struct sotto_model *m, const struct decode_result *d,
    size_t size, double offset, struct cuts *w)
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
	w->seek += size;
	cut(w, d->tokens, d->n_tokens, offset, offset + duration);
}

/* The window's tokens cut at consecutive timestamps, as openai does. */
static void
cut_window(const struct sotto_model *m, const struct decode_result *d,
    size_t size, double offset, struct cuts *w)
{
	int32_t tb = tok_specials(m->tok)->timestamp_begin;
	const int32_t *t = d->tokens;
	int n = d->n_tokens, last = 0, i;

	w->single_end = n >= 2 && t[n - 2] < tb && t[n - 1] >= tb;
	for (i = 1; i < n; i++) {
		if (!(t[i - 1] >= tb && t[i] >= tb))
			continue;
		cut(w, t + last, i - last, offset + (t[last] - tb) *
		    TIME_PRECISION, offset + (t[i - 1] - tb) * TIME_PRECISION);
		last = i;
	}
	if (w->n == 0)
		cut_whole(m, d, size, offset, w);
	else if (w->single_end) {
		cut(w, t + last, n - last, offset + (t[last] - tb) *
		    TIME_PRECISION, offset + (t[n - 1] - tb) * TIME_PRECISION);
		w->seek += size;
	} else
		w->seek += (size_t)(t[last - 1] - tb) * INPUT_STRIDE;
}

/* openai's get_end(): the last word's end, else the last cut's. */
static int
cuts_end(const struct cuts *w, double *ret)
{
	int i;

	for (i = w->n - 1; i >= 0; i--)
		if (w->c[i].n_words > 0) {
			*ret = w->c[i].words[w->c[i].n_words - 1].end;
			return 1;
		}
	if (w->n == 0)
		return 0;
	*ret = w->c[w->n - 1].end;
	return 1;
}

/*
 * Word timestamps of the window's cuts; the seek then follows the last
 * word (unless the window ended on a lone timestamp).
 */
static int
cuts_words(struct sotto_state *st, struct run *r, struct cuts *w,
    size_t size, double offset, char *err)
{
	const struct sotto_transcribe_params *p = r->params;
	struct words_opts o = { r->language, p->task, p->prepend_punctuations,
	    p->append_punctuations };
	double last = r->last_speech, end;
	int rc;

	if ((rc = words_window(st, &o, w->c, w->n, offset, size, &last,
	    err)) != 0)
		return rc;
	if (!cuts_end(w, &end))
		return 0;
	if (!w->single_end && end > offset)
		w->seek = (size_t)nearbyint(end * 100.0);
	r->last_speech = end;
	return 0;
}

int
segments_add(struct sotto_state *st, struct run *r,
    const struct decode_result *d, size_t size, char *err)
{
	double offset = r->seek * (double)WHISPER_HOP / SOTTO_SAMPLE_RATE;
	struct cuts *w;
	int i, rc = 0;

	if ((w = malloc(sizeof(*w))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	w->n = 0;
	w->single_end = 0;
	w->seek = r->seek;
	cut_window(r->model, d, size, offset, w);
	if (r->params->word_timestamps)
		rc = cuts_words(st, r, w, size, offset, err);
	for (i = 0; i < w->n && rc == 0; i++)
		rc = segment_add(r->model, r, &w->c[i], d, err);
	for (i = 0; i < w->n; i++)
		align_seg_clear(&w->c[i]);
	if (rc == 0)
		r->seek = w->seek;
	free(w);
	return rc;
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
		words_free(res->segments[i].words, res->segments[i].n_words);
	}
	free(res->segments);
	free(res->language);
	free(res);
}
