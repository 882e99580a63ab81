/*
 * The commit policy of a stream: LocalAgreement-2 over words.
 *
 * Each step decodes the window with the committed tokens still inside it
 * forced as a prefix; the hypothesis is what the decoder sampled after
 * it. A word of it is committed when the previous hypothesis has the same
 * word (the same tokens) at the same place, every word before it is
 * committed, something follows it in both, and its estimated end is
 * SETTLE_SECONDS or more before the end of the decoded audio. Timestamps
 * take no part in the agreement; the settled ones after the last
 * committed word are committed with it, and the closed segments they make
 * are where stream-slide.c moves the window to.
 *
 * Finals carry stream times from their words: what becomes final is
 * aligned to the audio (stream-words.c, as sotto_transcribe() aligns a
 * window's words), and a final runs from its first word's start to its
 * last word's end. Whisper's own timestamps are a segment's bounds, not
 * its words': after silence it often opens a segment at the window's
 * start, and a cut inside a segment could only be estimated (by the text
 * bytes before it), which gave cues a second away from their words and
 * cues of no length. The estimate is left for a final with no aligned
 * word (and for partials, which are never aligned).
 *
 * ref: ufal/whisper_streaming HypothesisBuffer (LocalAgreement-2), and
 * WhisperKit's eager mode (agreed tokens forced as prefixTokens).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "err.h"
#include "stream.h"
#include "tokenizer.h"
#include "transcribe.h"

/*
 * Words ending this close to the end of the decoded audio are not
 * committed on agreement alone: two hypotheses of a word cut off by the
 * window end often agree on the wrong word ("old" for "ill-dis...").
 */
#define SETTLE_SECONDS	1.0
/*
 * A word of a window with no committed text in it that ends this close
 * after the last final's end, or before it, is that final's audio
 * heard again (see emit): DTW places a word's end to a frame or two.
 */
#define HEARD_AGAIN_SECONDS	0.1

/* A timestamp, or a text token whose first byte is a space. */
int
stream_word_start(const struct sotto_stream *s, int32_t t)
{
	const char *b;
	size_t len;

	if (stream_is_ts(s, t))
		return 1;
	b = tok_token_bytes(s->model->tok, t, &len);
	return b != NULL && len > 0 && b[0] == ' ';
}

static double
base_seconds(const struct sotto_stream *s)
{
	return (double)s->window_start / SOTTO_SAMPLE_RATE;
}

/* The end of the audio pushed so far: no time goes past it. */
static double
audio_end(const struct sotto_stream *s)
{
	return (double)s->received / SOTTO_SAMPLE_RATE;
}

static size_t
text_bytes(const struct sotto_stream *s, const int32_t *t, int from, int to)
{
	size_t n = 0, len;
	int i;

	for (i = from; i < to; i++)
		if (t[i] < s->tb && tok_token_bytes(s->model->tok, t[i],
		    &len) != NULL)
			n += len;
	return n;
}

/*
 * Window seconds at token position i of seq[n]: a timestamp's own time,
 * else between the timestamps around i (if none follows, the aligned end
 * of the text or else the window's end) in proportion to the text bytes
 * before i.
 */
double
stream_estimate(const struct sotto_stream *s, const int32_t *seq, int n, int i)
{
	double ta = 0.0, tb = (double)s->n_win / SOTTO_SAMPLE_RATE;
	size_t before, total;
	int a, b;

	if (i < n && stream_is_ts(s, seq[i]))
		return (seq[i] - s->tb) * STREAM_TS_SECONDS;
	for (a = i - 1; a >= 0 && !stream_is_ts(s, seq[a]); a--)
		;
	for (b = i; b < n && !stream_is_ts(s, seq[b]); b++)
		;
	if (a >= 0)
		ta = (seq[a] - s->tb) * STREAM_TS_SECONDS;
	if (b < n)
		tb = (seq[b] - s->tb) * STREAM_TS_SECONDS;
	else if (s->text_end >= 0.0)
		tb = s->text_end;
	if (tb < ta)
		tb = ta;
	before = text_bytes(s, seq, a + 1, i);
	total = text_bytes(s, seq, a + 1, b);
	if (before == 0)
		return ta;
	return ta + (tb - ta) * (double)before / total;
}

static int
finals_grow(struct sotto_stream *s, char *err)
{
	struct sotto_segment *p;
	int cap;

	if (s->n_finals < s->cap_finals)
		return 0;
	cap = s->cap_finals ? 2 * s->cap_finals : 8;
	if ((p = realloc(s->finals, cap * sizeof(*p))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	s->finals = p;
	s->cap_finals = cap;
	return 0;
}

static int
blank(const char *t)
{
	while (*t != '\0' && isspace((unsigned char)*t))
		t++;
	return *t == '\0';
}

/* Text tokens of seq[0, i). */
static int
text_tokens(const struct sotto_stream *s, const int32_t *seq, int i)
{
	int k, n = 0;

	for (k = 0; k < i; k++)
		n += !stream_is_ts(s, seq[k]);
	return n;
}

/*
 * A final's times from its words: first start to last end, at least a
 * DTW frame long; start and end keep their estimates without words.
 */
static void
times_from_words(const struct sotto_segment *f, double *start, double *end)
{
	if (f->n_words == 0)
		return;
	*start = f->words[0].start;
	*end = f->words[f->n_words - 1].end;
	if (*end < *start + STREAM_TS_SECONDS)
		*end = *start + STREAM_TS_SECONDS;
}

/*
 * How many of the leading words w[n] of a window with no committed text
 * in it are committed words heard again: aligned to end by the end of
 * the last final (HEARD_AGAIN_SECONDS of slack).
 */
static int
heard_again(const struct sotto_stream *s, const struct sotto_word *w, int n)
{
	int k = 0;

	if (s->next_id == 0)
		return 0;
	while (k < n && w[k].end <= s->last_end + HEARD_AGAIN_SECONDS)
		k++;
	return k;
}

/*
 * The first k words of w[*n] dropped: the rest move to the front with
 * token indices from the first of them. Returns that word's index in
 * the text (the tokens before it are dropped from the final too).
 */
static int
drop_words(struct sotto_word *w, int *n, int k)
{
	int t0 = w[k].token_index, i;

	for (i = 0; i < k; i++)
		free(w[i].word);
	memmove(w, w + k, (*n - k) * sizeof(*w));
	*n -= k;
	for (i = 0; i < *n; i++)
		w[i].token_index -= t0;
	return t0;
}

/*
 * A final of seq[from, to) whose text tokens are seq[a, b). While
 * *fresh (its window had no committed text in it, and no word of this
 * commit has yet been kept), its leading words that are committed words
 * heard again are left out: a window cut inside or before the last
 * committed word can start with it again, and with no prefix to force,
 * Whisper writes it as it hears it ("efficient I said." after
 * "sufficient, I said."; stream_repeat finds it only when it is spelt
 * the same).
 */
static int
emit(struct sotto_stream *s, const int32_t *seq, int from, int to, int a,
    int b, double start, double end, int *fresh, char *err)
{
	struct sotto_segment *f;
	struct sotto_word *w = NULL;
	char *text;
	int rc, i, nw = 0, k = 0;

	if (s->words != NULL && (rc = stream_words_take(s->words,
	    text_tokens(s, seq, a), text_tokens(s, seq, b), &w, &nw,
	    err)) != 0)
		return rc;
	if (*fresh && nw > 0) {
		k = heard_again(s, w, nw);
		if (k == nw) {
			words_free(w, nw);
			return 0;
		}
		*fresh = 0;
		if (k > 0)
			from = a = a + drop_words(w, &nw, k);
	}
	if ((rc = tok_decode(s->model->tok, seq + a, b - a, &text,
	    err)) != 0) {
		words_free(w, nw);
		return rc;
	}
	if (blank(text) || (rc = finals_grow(s, err)) != 0) {
		free(text);
		words_free(w, nw);
		return rc;
	}
	f = &s->finals[s->n_finals];
	memset(f, 0, sizeof(*f));
	f->text = text;
	f->words = w;
	f->n_words = nw;
	if ((f->tokens = malloc((to - from) * sizeof(int32_t))) == NULL) {
		free(text);
		words_free(w, nw);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	memcpy(f->tokens, seq + from, (to - from) * sizeof(int32_t));
	f->n_tokens = to - from;
	for (i = 0; i < f->n_words; i++)	/* from its text to its tokens */
		f->words[i].token_index += a - from;
	times_from_words(f, &start, &end);
	if (!s->p.word_timestamps) {	/* aligned for the times alone */
		words_free(f->words, f->n_words);
		f->words = NULL;
		f->n_words = 0;
	}
	if (end > audio_end(s))
		end = audio_end(s);
	f->start = start > s->last_end ? start : s->last_end;
	if (f->start > end)
		f->start = end > s->last_end ? end : s->last_end;
	f->end = end > f->start ? end : f->start;
	segment_clamp(f, audio_end(s));
	if (s->n_finals == 0)
		s->first_id = s->next_id;
	s->next_id++;
	s->n_finals++;
	s->last_end = f->end;
	return 0;
}

/* Finals for seq[c0, c1): one per run of text between timestamps. */
static int
emit_range(struct sotto_stream *s, const int32_t *seq, int n, int c0,
    int c1, char *err)
{
	double base = base_seconds(s), start, end;
	int i = c0, a, b, from, to, rc;
	int fresh = !stream_has_text(s, seq, c0);

	while (i < c1) {
		if (stream_is_ts(s, seq[i])) {
			i++;
			continue;
		}
		for (a = i; i < c1 && !stream_is_ts(s, seq[i]); i++)
			;
		b = i;
		from = a > c0 && stream_is_ts(s, seq[a - 1]) ? a - 1 : a;
		to = b < c1 ? b + 1 : b;
		start = a > 0 && stream_is_ts(s, seq[a - 1]) ? base +
		    (seq[a - 1] - s->tb) * STREAM_TS_SECONDS : s->last_end;
		end = base + (b < c1 ? (seq[b] - s->tb) * STREAM_TS_SECONDS :
		    stream_estimate(s, seq, n, b));
		if ((rc = emit(s, seq, from, to, a, b, start, end, &fresh,
		    err)) != 0)
			return rc;
	}
	return 0;
}

/*
 * Commit h[0, k) of the hypothesis h[n] (which may alias s->hyp): finals,
 * then the prefix grows by it and the rest becomes s->hyp.
 */
static int
commit_range(struct sotto_stream *s, const int32_t *h, int n, int k,
    char *err)
{
	struct stream_words sw;
	int np = s->n_prefix, rc;

	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memmove(s->seq + np, h, n * sizeof(int32_t));
	if (k > 0) {
		if ((rc = stream_words_align(s, s->seq, np + n, &sw,
		    err)) != 0)
			return rc;
		s->words = &sw;
	}
	rc = k > 0 ? emit_range(s, s->seq, np + n, np, np + k, err) : 0;
	if (s->words != NULL) {
		stream_words_free(&sw);
		s->words = NULL;
	}
	if (rc != 0)
		return rc;
	memcpy(s->prefix + np, s->seq + np, k * sizeof(int32_t));
	s->n_prefix = np + k;
	memcpy(s->hyp, s->seq + np + k, (n - k) * sizeof(int32_t));
	s->n_hyp = n - k;
	return 0;
}

/*
 * Whether what ends at position j of s->seq[n] (the prefix, then the
 * hypothesis: the prefix's timestamps and text place an open segment's
 * words) is clear of the audio's end.
 */
static int
settled(const struct sotto_stream *s, int n, int j)
{
	double end = (double)s->n_win / SOTTO_SAMPLE_RATE;

	return stream_estimate(s, s->seq, n, j) <= end - SETTLE_SECONDS;
}

/* Index after the word starting at t[i]: the next word, a time or n. */
static int
word_end(const struct sotto_stream *s, const int32_t *t, int n, int i)
{
	for (i++; i < n && !stream_word_start(s, t[i]); i++)
		;
	return i;
}

static int
skip_times(const struct sotto_stream *s, const int32_t *t, int n, int i)
{
	while (i < n && stream_is_ts(s, t[i]))
		i++;
	return i;
}

/*
 * End of the words of h[n] that may be committed: each complete
 * (something follows it, or it is the last and the aligned end of the
 * text is settled: the decoder stopped there), settled, and with g[m]
 * given, the same as the next word of g (timestamps aside); then the
 * settled timestamps after the last of them.
 */
static int
words_end(struct sotto_stream *s, const int32_t *h, int n, const int32_t *g,
    int m)
{
	int np = s->n_prefix, i = 0, j = 0, k = 0, ei, ej = 0, closed;

	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memcpy(s->seq + np, h, n * sizeof(int32_t));
	closed = s->text_end >= 0.0 && settled(s, np + n, np + n);
	for (;;) {
		i = skip_times(s, h, n, i);
		if (i == n)
			break;
		ei = word_end(s, h, n, i);
		if (g != NULL) {
			j = skip_times(s, g, m, j);
			if (j == m)
				break;
			ej = word_end(s, g, m, j);
			if ((ej == m && !(closed && ei == n)) ||
			    ei - i != ej - j || memcmp(h + i, g + j,
			    (ei - i) * sizeof(int32_t)) != 0)
				break;
		}
		if ((ei == n && !closed) || !settled(s, np + n, np + ei))
			break;
		k = i = ei;
		j = ej;
	}
	while (k < n && stream_is_ts(s, h[k]) && settled(s, np + n, np + k))
		k++;
	return k;
}

/* LocalAgreement-2: the words of h[n] the previous hypothesis has too. */
static int
agreed(struct sotto_stream *s, const int32_t *h, int n)
{
	if (!s->hyp_valid)
		return 0;
	return words_end(s, h, n, s->hyp, s->n_hyp);
}

int
stream_commit(struct sotto_stream *s, const int32_t *h, int n, int all,
    char *err)
{
	int k = all ? n : agreed(s, h, n), rc;

	if (s->n_prefix + n > STREAM_MAX_TOKENS)
		n = STREAM_MAX_TOKENS - s->n_prefix;
	if (k > n)
		k = n;
	if ((rc = commit_range(s, h, n, k, err)) != 0)
		return rc;
	s->hyp_valid = 1;
	return 0;
}

/*
 * Force progress on a long window: commit the settled words of the
 * hypothesis, agreed or not.
 */
int
stream_commit_force(struct sotto_stream *s, char *err)
{
	int k = words_end(s, s->hyp, s->n_hyp, NULL, 0);

	if (k == 0)
		return 0;
	return commit_range(s, s->hyp, s->n_hyp, k, err);
}

void
stream_commit_reset(struct sotto_stream *s)
{
	int i;

	for (i = 0; i < s->n_finals; i++) {
		free(s->finals[i].text);
		free(s->finals[i].tokens);
		words_free(s->finals[i].words, s->finals[i].n_words);
	}
	s->n_finals = 0;
	free(s->partial);
	s->partial = NULL;
}

/* The partial: the uncommitted hypothesis, with estimated times. */
int
stream_commit_partial(struct sotto_stream *s, char *err)
{
	return stream_commit_partial_of(s, s->hyp, s->n_hyp, err);
}

int
stream_commit_partial_of(struct sotto_stream *s, const int32_t *h, int nh,
    char *err)
{
	double base = base_seconds(s);
	int np = s->n_prefix, n = np + nh, rc;

	free(s->partial);
	s->partial = NULL;
	if ((rc = tok_decode(s->model->tok, h, nh, &s->partial, err)) != 0)
		return rc;
	if (nh == 0 || blank(s->partial)) {
		s->partial[0] = '\0';
		s->partial_start = s->partial_end = s->last_end;
		return 0;
	}
	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memcpy(s->seq + np, h, nh * sizeof(int32_t));
	s->partial_start = base + stream_estimate(s, s->seq, n, np);
	if (s->partial_start < s->last_end)
		s->partial_start = s->last_end;
	s->partial_end = base + stream_estimate(s, s->seq, n, n);
	if (s->partial_end > audio_end(s))
		s->partial_end = audio_end(s);
	if (s->partial_start > s->partial_end)
		s->partial_start = s->partial_end > s->last_end ?
		    s->partial_end : s->last_end;
	if (s->partial_end < s->partial_start)
		s->partial_end = s->partial_start;
	return 0;
}
