/*
 * The commit policy of a stream: LocalAgreement-2 over token ids.
 *
 * Each step decodes the window with the committed tokens still inside it
 * forced as a prefix; the hypothesis is what the decoder sampled after
 * it. The longest common prefix of this hypothesis and the previous one
 * is committed, cut back to a word boundary (a timestamp, or a text token
 * whose bytes start with a space, on both sides), so a word is final only
 * when two consecutive decodes agree on all of it. Agreed timestamps are
 * committed too: once a Whisper segment is closed (text, then its end
 * timestamp) and another one after it, the window slides to the end of
 * the older one, its tokens move to the prompt history, and the
 * remaining prefix and hypothesis are shifted to the new window.
 *
 * Finals carry stream times: a timestamp token gives its time exactly;
 * a cut inside a segment is estimated by interpolating between the
 * segment's timestamps in proportion to the text bytes before the cut.
 *
 * ref: ufal/whisper_streaming HypothesisBuffer (LocalAgreement-2), and
 * WhisperKit's eager mode (agreed tokens forced as prefixTokens).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "stream.h"
#include "tokenizer.h"

#define TS_SECONDS	0.02
/*
 * Words ending this close to the end of the decoded audio are not
 * committed on agreement alone: two hypotheses of a word cut off by the
 * window end often agree on the wrong word ("old" for "ill-dis...").
 */
#define SETTLE_SECONDS	1.0

static int
is_ts(const struct sotto_stream *s, int32_t t)
{
	return t >= s->tb;
}

/* A timestamp, or a text token whose first byte is a space. */
static int
word_start(const struct sotto_stream *s, int32_t t)
{
	const char *b;
	size_t len;

	if (is_ts(s, t))
		return 1;
	b = tok_token_bytes(s->model->tok, t, &len);
	return b != NULL && len > 0 && b[0] == ' ';
}

static double
base_seconds(const struct sotto_stream *s)
{
	return (double)s->window_start / SOTTO_SAMPLE_RATE;
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
 * else between the timestamps around i (the window end if none follows)
 * in proportion to the text bytes before i.
 */
static double
estimate(const struct sotto_stream *s, const int32_t *seq, int n, int i)
{
	double ta = 0.0, tb = (double)s->n_win / SOTTO_SAMPLE_RATE;
	size_t before, total;
	int a, b;

	if (i < n && is_ts(s, seq[i]))
		return (seq[i] - s->tb) * TS_SECONDS;
	for (a = i - 1; a >= 0 && !is_ts(s, seq[a]); a--)
		;
	for (b = i; b < n && !is_ts(s, seq[b]); b++)
		;
	if (a >= 0)
		ta = (seq[a] - s->tb) * TS_SECONDS;
	if (b < n)
		tb = (seq[b] - s->tb) * TS_SECONDS;
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

/* A final of seq[from, to) whose text tokens are seq[a, b). */
static int
emit(struct sotto_stream *s, const int32_t *seq, int from, int to, int a,
    int b, double start, double end, char *err)
{
	struct sotto_segment *f;
	char *text;
	int rc;

	if ((rc = tok_decode(s->model->tok, seq + a, b - a, &text, err)) != 0)
		return rc;
	if (blank(text)) {
		free(text);
		return 0;
	}
	if ((rc = finals_grow(s, err)) != 0) {
		free(text);
		return rc;
	}
	f = &s->finals[s->n_finals];
	memset(f, 0, sizeof(*f));
	f->text = text;
	if ((f->tokens = malloc((to - from) * sizeof(int32_t))) == NULL) {
		free(text);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	memcpy(f->tokens, seq + from, (to - from) * sizeof(int32_t));
	f->n_tokens = to - from;
	f->start = start > s->last_end ? start : s->last_end;
	f->end = end > f->start ? end : f->start;
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

	while (i < c1) {
		if (is_ts(s, seq[i])) {
			i++;
			continue;
		}
		for (a = i; i < c1 && !is_ts(s, seq[i]); i++)
			;
		b = i;
		from = a > c0 && is_ts(s, seq[a - 1]) ? a - 1 : a;
		to = b < c1 ? b + 1 : b;
		start = a > 0 && is_ts(s, seq[a - 1]) ?
		    base + (seq[a - 1] - s->tb) * TS_SECONDS : s->last_end;
		end = base + (b < c1 ? (seq[b] - s->tb) * TS_SECONDS :
		    estimate(s, seq, n, b));
		if ((rc = emit(s, seq, from, to, a, b, start, end, err)) != 0)
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
	int np = s->n_prefix, rc;

	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memmove(s->seq + np, h, n * sizeof(int32_t));
	if (k > 0 && (rc = emit_range(s, s->seq, np + n, np, np + k,
	    err)) != 0)
		return rc;
	memcpy(s->prefix + np, s->seq + np, k * sizeof(int32_t));
	s->n_prefix = np + k;
	memcpy(s->hyp, s->seq + np + k, (n - k) * sizeof(int32_t));
	s->n_hyp = n - k;
	return 0;
}

/* A word ends before position j of seq[n] (the end only after a time). */
static int
boundary(const struct sotto_stream *s, const int32_t *seq, int n, int j)
{
	if (j < n)
		return word_start(s, seq[j]);
	return j > 0 && is_ts(s, seq[j - 1]);
}

/* Whether what ends at position j of h[n] is clear of the audio's end. */
static int
settled(const struct sotto_stream *s, const int32_t *h, int n, int j)
{
	double end = (double)s->n_win / SOTTO_SAMPLE_RATE;

	return estimate(s, h, n, j) <= end - SETTLE_SECONDS;
}

/*
 * Tokens of h[n] agreed with the previous hypothesis, at a word end that
 * is settled.
 */
static int
agreed(const struct sotto_stream *s, const int32_t *h, int n)
{
	int k = 0, j;

	if (!s->hyp_valid)
		return 0;
	while (k < n && k < s->n_hyp && h[k] == s->hyp[k])
		k++;
	for (j = k; j > 0; j--)
		if (boundary(s, h, n, j) && boundary(s, s->hyp, s->n_hyp, j) &&
		    settled(s, h, n, j))
			break;
	return j;
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

/* Index just after the last timestamp closing a segment in t[n], or 0. */
static int
last_close(const struct sotto_stream *s, const int32_t *t, int n)
{
	int i;

	for (i = n; i >= 2; i--)
		if (is_ts(s, t[i - 1]) && !is_ts(s, t[i - 2]))
			return i;
	return 0;
}

/*
 * Force progress on a long window: commit the hypothesis up to its last
 * closed segment; with full (no room left) commit all of it.
 */
int
stream_commit_force(struct sotto_stream *s, int full, char *err)
{
	int k = last_close(s, s->hyp, s->n_hyp);

	if (full)
		k = s->n_hyp;
	if (k == 0)
		return 0;
	return commit_range(s, s->hyp, s->n_hyp, k, err);
}

static void
history_add(struct sotto_stream *s, const int32_t *t, int n)
{
	int keep;

	if (n >= DECODE_MAX_PROMPT) {
		memcpy(s->history, t + n - DECODE_MAX_PROMPT,
		    DECODE_MAX_PROMPT * sizeof(int32_t));
		s->n_history = DECODE_MAX_PROMPT;
		return;
	}
	keep = s->n_history + n > DECODE_MAX_PROMPT ?
	    DECODE_MAX_PROMPT - n : s->n_history;
	memmove(s->history, s->history + s->n_history - keep,
	    keep * sizeof(int32_t));
	memcpy(s->history + keep, t, n * sizeof(int32_t));
	s->n_history = keep + n;
}

static void
shift_times(struct sotto_stream *s, int32_t *t, int n, int32_t by)
{
	int i;

	for (i = 0; i < n; i++)
		if (is_ts(s, t[i]))
			t[i] = t[i] - by >= s->tb ? t[i] - by : s->tb;
}

/* Drop n samples from the front of the window (clamped). */
static void
drop_samples(struct sotto_stream *s, size_t n)
{
	if (n > s->n_pcm)
		n = s->n_pcm;
	memmove(s->pcm, s->pcm + n, (s->n_pcm - n) * sizeof(float));
	s->n_pcm -= n;
	s->window_start += n;
	s->n_win = s->n_win > n ? s->n_win - n : 0;
}

/*
 * Slide past the closed segments of the prefix but the last keep of them
 * (0 or 1). Returns 1 if the window moved.
 *
 * Keeping the newest closed segment in the window (its tokens stay in
 * the forced prefix, so it is not transcribed again) matters: an end
 * timestamp is often late by a few hundred ms, and sliding right to it
 * would cut the first word of what follows.
 */
int
stream_commit_slide(struct sotto_stream *s, int keep)
{
	int i = last_close(s, s->prefix, s->n_prefix);
	int32_t by;

	if (keep && i > 0)
		i = last_close(s, s->prefix, i - 1);
	if (i == 0 || (by = s->prefix[i - 1] - s->tb) <= 0)
		return 0;
	history_add(s, s->prefix, i);
	s->n_prefix -= i;
	memmove(s->prefix, s->prefix + i, s->n_prefix * sizeof(int32_t));
	shift_times(s, s->prefix, s->n_prefix, by);
	shift_times(s, s->hyp, s->n_hyp, by);
	drop_samples(s, (size_t)by * STREAM_TS_SAMPLES);
	return 1;
}

/* Drop audio without a segment to slide to: the prefix is history. */
void
stream_commit_drop(struct sotto_stream *s, size_t n_samples)
{
	history_add(s, s->prefix, s->n_prefix);
	s->n_prefix = 0;
	s->n_hyp = 0;
	s->hyp_valid = 0;
	drop_samples(s, n_samples);
}

void
stream_commit_reset(struct sotto_stream *s)
{
	int i;

	for (i = 0; i < s->n_finals; i++) {
		free(s->finals[i].text);
		free(s->finals[i].tokens);
	}
	s->n_finals = 0;
	free(s->partial);
	s->partial = NULL;
}

/* The partial: the uncommitted hypothesis, with estimated times. */
int
stream_commit_partial(struct sotto_stream *s, char *err)
{
	double base = base_seconds(s);
	int np = s->n_prefix, n = np + s->n_hyp, rc;

	if ((rc = tok_decode(s->model->tok, s->hyp, s->n_hyp, &s->partial,
	    err)) != 0)
		return rc;
	if (s->n_hyp == 0 || blank(s->partial)) {
		s->partial[0] = '\0';
		s->partial_start = s->partial_end = s->last_end;
		return 0;
	}
	memcpy(s->seq, s->prefix, np * sizeof(int32_t));
	memcpy(s->seq + np, s->hyp, s->n_hyp * sizeof(int32_t));
	s->partial_start = base + estimate(s, s->seq, n, np);
	if (s->partial_start < s->last_end)
		s->partial_start = s->last_end;
	s->partial_end = base + estimate(s, s->seq, n, n);
	if (s->partial_end < s->partial_start)
		s->partial_end = s->partial_start;
	return 0;
}
