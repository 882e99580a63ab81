/*
 * Word times of a stream's finals (sotto_stream_params.word_timestamps):
 * when something becomes final, the whole text of the window (the
 * committed tokens still in it and the new hypothesis) is aligned to the
 * window's audio as sotto_transcribe() aligns a window (align.c,
 * words.c), each run of text between timestamps taken as a segment;
 * each final then takes the words that start in its tokens.
 */
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "err.h"
#include "stream.h"

/* Window seconds where seq[i] starts (or i = n: the end). */
static double
at(const struct sotto_stream *s, const int32_t *seq, int n, int i)
{
	return stream_estimate(s, seq, n, i);
}

/* seq[n] cut into runs of text, as segments in stream seconds. */
static int
runs(const struct sotto_stream *s, const int32_t *seq, int n,
    struct align_seg *segs)
{
	double base = (double)s->window_start / SOTTO_SAMPLE_RATE;
	int i = 0, a, k = 0;

	while (i < n) {
		if (stream_is_ts(s, seq[i])) {
			i++;
			continue;
		}
		for (a = i; i < n && !stream_is_ts(s, seq[i]); i++)
			;
		memset(&segs[k], 0, sizeof(segs[k]));
		segs[k].tokens = seq + a;
		segs[k].n_tokens = i - a;
		segs[k].start = base + (a > 0 ? at(s, seq, n, a - 1) :
		    at(s, seq, n, a));
		segs[k].end = base + at(s, seq, n, i);
		k++;
	}
	return k;
}

/* Move the segments' words into ret, each with its first text token. */
static int
flatten(struct align_seg *segs, int n_segs, struct stream_words *ret,
    char *err)
{
	int total = 0, tok = 0, i, j;

	for (i = 0; i < n_segs; i++)
		total += segs[i].n_words;
	ret->w = calloc(total ? total : 1, sizeof(*ret->w));
	ret->tok0 = calloc(total ? total : 1, sizeof(int));
	if (ret->w == NULL || ret->tok0 == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < n_segs; i++) {
		int t = tok;

		for (j = 0; j < segs[i].n_words; j++) {
			ret->w[ret->n] = segs[i].words[j];
			segs[i].words[j].word = NULL;
			ret->tok0[ret->n++] = t;
			t += segs[i].word_tokens[j];
		}
		tok += segs[i].n_tokens;
	}
	return 0;
}

int
stream_words_align(struct sotto_stream *s, const int32_t *seq, int n,
    struct stream_words *ret, char *err)
{
	struct words_opts o = { s->language, s->p.task, NULL, NULL };
	struct align_seg *segs;
	size_t win = s->n_win;
	double last = s->last_end;
	int n_segs, i, rc;

	memset(ret, 0, sizeof(*ret));
	if (win == 0)
		win = s->n_pcm < WHISPER_N_SAMPLES ? s->n_pcm :
		    WHISPER_N_SAMPLES;
	if (win == 0 || n == 0)
		return 0;
	/* the window slid since it was encoded (a finish without audio) */
	if ((s->enc_n != win || s->enc_start != s->window_start) &&
	    (rc = stream_encode(s, win, err)) != 0)
		return rc;
	if ((segs = calloc(n, sizeof(*segs))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	n_segs = runs(s, seq, n, segs);
	rc = words_window(s->st, &o, segs, n_segs, (double)s->window_start /
	    SOTTO_SAMPLE_RATE, win / WHISPER_HOP, &last, err);
	if (rc == 0)
		rc = flatten(segs, n_segs, ret, err);
	for (i = 0; i < n_segs; i++)
		align_seg_clear(&segs[i]);
	free(segs);
	if (rc != 0)
		stream_words_free(ret);
	return rc;
}

int
stream_words_take(const struct stream_words *sw, int t0, int t1,
    struct sotto_word **ret, int *ret_n, char *err)
{
	int i, n = 0;

	*ret = NULL;
	*ret_n = 0;
	if ((*ret = calloc(sw->n ? sw->n : 1, sizeof(**ret))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < sw->n; i++) {
		if (sw->tok0[i] < t0 || sw->tok0[i] >= t1)
			continue;
		(*ret)[n] = sw->w[i];
		(*ret)[n].token_index = sw->tok0[i] - t0;
		if (((*ret)[n].word = strdup(sw->w[i].word)) == NULL) {
			words_free(*ret, n);
			*ret = NULL;
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		}
		n++;
	}
	*ret_n = n;
	return 0;
}

void
stream_words_free(struct stream_words *sw)
{
	words_free(sw->w, sw->n);
	free(sw->tok0);
	memset(sw, 0, sizeof(*sw));
}

/* seq[n]'s text ends after its last timestamp. */
static int
untimed_end(const struct sotto_stream *s, const int32_t *seq, int n)
{
	return n > 0 && !stream_is_ts(s, seq[n - 1]);
}

int
stream_time_text(struct sotto_stream *s, const int32_t *h, int n, char *err)
{
	int np = s->n_prefix, total = np + n, k = 0, i, rc;
	int32_t *text;
	float *jump, *prob;

	s->text_end = -1.0;
	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memcpy(s->seq + np, h, n * sizeof(int32_t));
	if (!untimed_end(s, s->seq, total) || s->n_win == 0 ||
	    (s->n_win < STREAM_SLIDE_MS * (SOTTO_SAMPLE_RATE / 1000) &&
	    (np == 0 || stream_is_ts(s, s->prefix[0]))))
		return 0;
	text = malloc(total * sizeof(*text));
	jump = malloc((total + 1) * sizeof(*jump));
	prob = malloc(total * sizeof(*prob));
	if (text == NULL || jump == NULL || prob == NULL) {
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
		goto out;
	}
	for (i = 0; i < total; i++)
		if (!stream_is_ts(s, s->seq[i]))
			text[k++] = s->seq[i];
	rc = align_window(s->st, s->language, s->p.task, text, k,
	    s->n_win / WHISPER_HOP, jump, prob, err);
	if (rc == 0)
		s->text_end = jump[k];
out:
	free(text);
	free(jump);
	free(prob);
	return rc;
}
