/*
 * Committed words found again at the start of a hypothesis.
 *
 * Two cases. At the end of the stream the rest of the window is decoded
 * without the committed prefix forced, as sotto_transcribe() would
 * decode it; that hypothesis starts with the committed words of the
 * window, and only what follows them is new (stream_match). And a
 * window with no committed words in it (just slid past them, or after
 * silence) may start with what is left of the last of them (a cut is
 * only as good as the closing timestamp near it), and Whisper
 * writes it again; it must not become final twice (stream_repeat).
 * (When the committed text before the window was the prompt, on noise
 * Whisper often repeated the prompt's last words too.)
 *
 * Words are compared by their letters and digits only, lower case, so
 * "cold-hearted" repeats "coldhearted" and "Stop." repeats "stop,".
 *
 * ref: ufal/whisper_streaming HypothesisBuffer.insert (drops 1- to
 * 5-grams of the new words that repeat the last committed ones).
 */
#include <ctype.h>
#include <stdlib.h>

#include "stream.h"
#include "tokenizer.h"

/* Words of the history a window's hypothesis may repeat at its start. */
#define REPEAT_WORDS	5
/*
 * Words at the end of the committed prefix that mark where it ends in a
 * hypothesis that does not start with all of it: three words rarely
 * recur within one window by chance.
 */
#define TAIL_WORDS	3

/*
 * Next letter or digit (lower case; bytes of UTF-8 sequences as they
 * are) of the text tokens of t[n], from byte *b of token *i on; -1 at
 * the end. Leaves *i at its token and *b just after it.
 */
static int
next_letter(const struct sotto_stream *s, const int32_t *t, int n, int *i,
    size_t *b)
{
	const unsigned char *p;
	size_t len;

	for (; *i < n; (*i)++, *b = 0) {
		if (stream_is_ts(s, t[*i]) || (p = (const unsigned char *)
		    tok_token_bytes(s->model->tok, t[*i], &len)) == NULL)
			continue;
		for (; *b < len; (*b)++)
			if (p[*b] >= 0x80 || isalnum(p[*b]))
				return tolower(p[(*b)++]);
	}
	return -1;
}

int
stream_has_text(const struct sotto_stream *s, const int32_t *t, int n)
{
	int i;

	for (i = 0; i < n; i++)
		if (!stream_is_ts(s, t[i]))
			return 1;
	return 0;
}

int
stream_has_words(const struct sotto_stream *s, const int32_t *t, int n)
{
	size_t b = 0;
	int i = 0;

	return next_letter(s, t, n, &i, &b) >= 0;
}

static int
has_letters(const struct sotto_stream *s, int32_t t)
{
	size_t b = 0;
	int i = 0;

	return next_letter(s, &t, 1, &i, &b) >= 0;
}

/*
 * Index of h[n] after the letters of c[nc], and after the punctuation
 * that follows them in h; -1 if h does not start with them or they end
 * inside a token of h. 0 if c has no letters.
 */
static int
letters_match(const struct sotto_stream *s, const int32_t *c, int nc,
    const int32_t *h, int n)
{
	int ci = 0, hi = 0, ch, last = -1, j;
	size_t cb = 0, hb = 0;

	while ((ch = next_letter(s, c, nc, &ci, &cb)) >= 0) {
		if (next_letter(s, h, n, &hi, &hb) != ch)
			return -1;
		last = hi;
	}
	if (last < 0)
		return 0;
	j = last;
	if (next_letter(s, h, last + 1, &j, &hb) >= 0)
		return -1;
	for (j = last + 1; j < n && !stream_is_ts(s, h[j]) &&
	    !has_letters(s, h[j]); j++)
		;
	return j;
}

/*
 * Where the text after the committed prefix of the window begins in
 * h[n], a hypothesis decoded without it forced; -1 if h does not start
 * with the prefix's words.
 */
int
stream_match(const struct sotto_stream *s, const int32_t *h, int n)
{
	return letters_match(s, s->prefix, s->n_prefix, h, n);
}

/* Index of the k-th last word start in t[n] (timestamps skipped), or -1. */
static int
last_words(const struct sotto_stream *s, const int32_t *t, int n, int k)
{
	int i;

	for (i = n - 1; i >= 0; i--)
		if (!stream_is_ts(s, t[i]) && (i == 0 ||
		    stream_word_start(s, t[i])) && --k == 0)
			return i;
	return -1;
}

/* Whether a word starts at h[i] (a time before it starts one too). */
static int
word_at(const struct sotto_stream *s, const int32_t *h, int i)
{
	return !stream_is_ts(s, h[i]) && (i == 0 ||
	    stream_is_ts(s, h[i - 1]) || stream_word_start(s, h[i]));
}

/*
 * Where the text after the committed prefix begins in h[n], a hypothesis
 * decoded without it forced that does not start with all of it: after
 * the first whole words of h that are the prefix's last TAIL_WORDS (or
 * all of its words, if fewer), and the punctuation after them; -1 if h
 * has none. The decoder may hear a window's first committed words
 * otherwise ("power" where the cut left "his power") and still repeat
 * the rest of them.
 */
int
stream_match_tail(const struct sotto_stream *s, const int32_t *h, int n)
{
	int k, i = -1, j, m;

	for (k = TAIL_WORDS; k > 0 && i < 0; k--)
		i = last_words(s, s->prefix, s->n_prefix, k);
	if (i < 0 || !stream_has_words(s, s->prefix + i, s->n_prefix - i))
		return -1;
	for (j = 0; j < n; j++) {
		if (!word_at(s, h, j))
			continue;
		m = letters_match(s, s->prefix + i, s->n_prefix - i, h + j,
		    n - j);
		if (m > 0 && (j + m == n || stream_word_start(s, h[j + m])))
			return j + m;
	}
	return -1;
}

/*
 * Tokens at the start of h[n] that repeat the last words (up to
 * REPEAT_WORDS, the most that match) of the history: whole words of h,
 * the punctuation after them included.
 */
int
stream_repeat(const struct sotto_stream *s, const int32_t *h, int n)
{
	int k, i, j;

	for (k = REPEAT_WORDS; k > 0; k--) {
		if ((i = last_words(s, s->history, s->n_history, k)) < 0)
			continue;
		j = letters_match(s, s->history + i, s->n_history - i, h, n);
		if (j > 0 && (j == n || stream_word_start(s, h[j])))
			return j;
	}
	return 0;
}
