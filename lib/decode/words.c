/*
 * Words of a window from its aligned tokens (align.c), openai/whisper's
 * way: tokens are grouped into words (at spaces, punctuation and special
 * tokens; for languages written without spaces at every whole character),
 * a word spans from where the warping path reaches its first token to
 * where it reaches the next word's, sentence ends and punctuation are
 * merged, and each segment of the window takes its words by token count;
 * the first and last word of a segment are held to the segment's own
 * timestamps where they run long, and the segment's times become its
 * words'.
 *
 * ref: whisper/timing.py add_word_timestamps(), merge_punctuations();
 * whisper/tokenizer.py split_to_word_tokens(); faster_whisper's copies.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "align.h"
#include "err.h"
#include "tokenizer.h"

/* openai's defaults, and Python's string.punctuation */
static const char PREPEND[] = "\"'\u201c\u00bf([{-";
static const char APPEND[] = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a"
    "\u201d)]}\u3001";
static const char PUNCTUATION[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";
static const char SENTENCE_END[] = ".\u3002!\uff01?\uff1f";

/* A word being built: text, its tokens [t0, t0 + n), time, probability. */
struct wt {
	char *word;
	int t0, n;
	double start, end;
	double prob;
};

struct wlist {
	struct wt *w;
	int n, cap;
};

static void
wlist_free(struct wlist *l)
{
	int i;

	for (i = 0; i < l->n; i++)
		free(l->w[i].word);
	free(l->w);
}

static int
wlist_push(struct wlist *l, char *word, int t0, int n, char *err)
{
	struct wt *p;

	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		if ((p = realloc(l->w, l->cap * sizeof(*p))) == NULL) {
			free(word);
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		}
		l->w = p;
	}
	memset(&l->w[l->n], 0, sizeof(l->w[0]));
	l->w[l->n].word = word;
	l->w[l->n].t0 = t0;
	l->w[l->n].n = n;
	l->n++;
	return 0;
}

/* a + b as a new string; a is freed. */
static char *
concat(char *a, const char *b, int b_first)
{
	size_t la = strlen(a), lb = strlen(b);
	char *s = malloc(la + lb + 1);

	if (s != NULL) {
		memcpy(s, b_first ? b : a, b_first ? lb : la);
		memcpy(s + (b_first ? lb : la), b_first ? a : b, b_first ? la :
		    lb);
		s[la + lb] = '\0';
	}
	free(a);
	return s;
}

/* Bytes of the white space (as Python's str.isspace) at s, or 0. */
static size_t
space_len(const unsigned char *s)
{
	if ((*s >= '\t' && *s <= '\r') || (*s >= 0x1c && *s <= ' '))
		return 1;
	if (s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0))
		return 2;
	if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)
		return 3;
	if (s[0] == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) ||
	    s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
		return 3;
	if ((s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) ||
	    (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80))
		return 3;
	return 0;
}

/* Whether s without surrounding white space is a substring of set. */
static int
stripped_in(const char *s, const char *set)
{
	const unsigned char *p = (const unsigned char *)s, *q;
	size_t k, n = 0, i, len = strlen(set);

	while ((k = space_len(p)) > 0)
		p += k;
	/* n: up to the end of the last byte that is not white space */
	for (q = p; *q != '\0'; q += k ? k : 1)
		if ((k = space_len(q)) == 0)
			n = (size_t)(q - p) + 1;
	for (i = 0; i + n <= len; i++)
		if (memcmp(set + i, p, n) == 0)
			return 1;
	return 0;
}

/* Code point index of the first U+FFFD in s, or -1. */
static long
fffd_index(const char *s)
{
	long i = 0;

	for (; *s != '\0'; s++) {
		if ((*s & 0xc0) == 0x80)
			continue;
		if (strncmp(s, "\xef\xbf\xbd", 3) == 0)
			return i;
		i++;
	}
	return -1;
}

/* Whether code point i of s is U+FFFD. */
static int
fffd_at(const char *s, long i)
{
	for (; *s != '\0'; s++) {
		if ((*s & 0xc0) == 0x80)
			continue;
		if (i-- == 0)
			return strncmp(s, "\xef\xbf\xbd", 3) == 0;
	}
	return 0;
}

static long
code_points(const char *s)
{
	long n = 0;

	for (; *s != '\0'; s++)
		n += (*s & 0xc0) != 0x80;
	return n;
}

/*
 * tokens[n] into pieces of whole characters: a piece ends where its
 * text decodes without U+FFFD, or where the U+FFFD is in the whole
 * text too (invalid bytes, not a character cut in two).
 */
static int
split_unicode(const struct tokenizer *tok, const int32_t *t, int n,
    struct wlist *out, char *err)
{
	char *full, *piece;
	long offset = 0, bad;
	int i, from = 0, rc;

	if ((rc = tok_decode(tok, t, n, &full, err)) != 0)
		return rc;
	for (i = 0; i < n; i++) {
		if ((rc = tok_decode(tok, t + from, i + 1 - from, &piece,
		    err)) != 0)
			break;
		bad = fffd_index(piece);
		if (bad >= 0 && !fffd_at(full, offset + bad)) {
			free(piece);
			continue;
		}
		offset += code_points(piece);
		if ((rc = wlist_push(out, piece, from, i + 1 - from,
		    err)) != 0)
			break;
		from = i + 1;
	}
	free(full);
	return rc;
}

/* Pieces joined into words: a new word at a space, punctuation, special. */
static int
split_spaces(const struct tokenizer *tok, const int32_t *t, int n,
    struct wlist *out, char *err)
{
	struct wlist sub = { 0 };
	int32_t eot = tok_specials(tok)->eot;
	int i, rc;

	if ((rc = split_unicode(tok, t, n, &sub, err)) != 0)
		goto out;
	for (i = 0; i < sub.n; i++) {
		struct wt *s = &sub.w[i], *last;

		if (out->n == 0 || t[s->t0] >= eot || s->word[0] == ' ' ||
		    stripped_in(s->word, PUNCTUATION)) {
			if ((rc = wlist_push(out, s->word, s->t0, s->n,
			    err)) != 0)
				goto out;
			s->word = NULL;
			continue;
		}
		last = &out->w[out->n - 1];
		if ((last->word = concat(last->word, s->word, 0)) == NULL) {
			rc = err_set(err, SOTTO_ENOMEM, "out of memory");
			goto out;
		}
		last->n += s->n;
	}
out:
	wlist_free(&sub);
	return rc;
}

static int
written_without_spaces(const char *code)
{
	static const char *const codes[] = { "zh", "ja", "th", "lo", "my",
	    "yue" };
	size_t i;

	for (i = 0; code != NULL && i < sizeof(codes) / sizeof(codes[0]); i++)
		if (strcmp(code, codes[i]) == 0)
			return 1;
	return 0;
}

static int
split_words(const struct sotto_model *m, int language, const int32_t *t,
    int n, struct wlist *out, char *err)
{
	const char *code = language >= 0 ? tok_language_code(m->tok,
	    language) : "en";

	if (written_without_spaces(code))
		return split_unicode(m->tok, t, n, out, err);
	return split_spaces(m->tok, t, n, out, err);
}

static int
dbl_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* numpy's median of the non-zero durations, at most 0.7 s; 0 if none. */
static double
median_duration(const struct wlist *l)
{
	double *d, med = 0.0;
	int i, n = 0;

	if ((d = malloc((l->n ? l->n : 1) * sizeof(double))) == NULL)
		return 0.0;
	for (i = 0; i < l->n; i++)
		if (l->w[i].end - l->w[i].start != 0.0)
			d[n++] = l->w[i].end - l->w[i].start;
	if (n > 0) {
		qsort(d, n, sizeof(double), dbl_cmp);
		med = n % 2 ? d[n / 2] : (d[n / 2 - 1] + d[n / 2]) / 2.0;
	}
	free(d);
	return med < 0.7 ? med : 0.7;
}

/* Words at sentence ends no longer than max (openai's "hack"). */
static void
clip_sentence_ends(struct wlist *l, double max)
{
	int i;

	for (i = 1; i < l->n; i++) {
		struct wt *w = &l->w[i];

		if (w->end - w->start <= max)
			continue;
		if (strstr(SENTENCE_END, w->word) != NULL)
			w->end = w->start + max;
		else if (strstr(SENTENCE_END, l->w[i - 1].word) != NULL)
			w->start = w->end - max;
	}
}

/* Move prev's text and tokens into next (before or after its own). */
static int
merge_into(struct wt *into, struct wt *from, int before, char *err)
{
	if ((into->word = concat(into->word, from->word, before)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	into->n += from->n;
	if (before)
		into->t0 = from->t0;
	from->word[0] = '\0';
	from->n = 0;
	return 0;
}

static int
merge_punctuation(struct wlist *l, const char *prepend, const char *append,
    char *err)
{
	int i, j, rc;

	for (i = l->n - 2, j = l->n - 1; i >= 0; i--) {
		struct wt *prev = &l->w[i];

		if (prev->word[0] == ' ' && stripped_in(prev->word, prepend)) {
			if ((rc = merge_into(&l->w[j], prev, 1, err)) != 0)
				return rc;
		} else
			j = i;
	}
	for (i = 0, j = 1; j < l->n; j++) {
		struct wt *prev = &l->w[i], *next = &l->w[j];
		size_t n = strlen(prev->word);

		if ((n == 0 || prev->word[n - 1] != ' ') &&
		    strstr(append, next->word) != NULL) {
			if ((rc = merge_into(prev, next, 0, err)) != 0)
				return rc;
		} else
			i = j;
	}
	return 0;
}

static double
round2(double x)
{
	return round(x * 100.0) / 100.0;
}

/*
 * A segment's words are held to its timestamps after a pause and where
 * the first or last runs long; the segment takes its words' times.
 */
static void
fit_segment(struct align_seg *s, double med, double max, double *last)
{
	struct sotto_word *w = s->words;
	int n = s->n_words;

	if (n == 0)
		return;
	if (w[0].end - *last > med * 4 && (w[0].end - w[0].start > max ||
	    (n > 1 && w[1].end - w[0].start > max * 2))) {
		if (n > 1 && w[1].end - w[1].start > max) {
			double b = fmax(w[1].end / 2, w[1].end - max);

			w[0].end = w[1].start = b;
		}
		w[0].start = fmax(0.0, w[0].end - max);
	}
	if (s->start < w[0].end && s->start - 0.5 > w[0].start)
		w[0].start = fmax(0.0, fmin(w[0].end - med, s->start));
	else
		s->start = w[0].start;
	if (s->end > w[n - 1].start && s->end + 0.5 < w[n - 1].end)
		w[n - 1].end = fmax(w[n - 1].start + med, s->end);
	else
		s->end = w[n - 1].end;
	*last = s->end;
}

/*
 * Segment s takes the next words of l up to its n_text tokens; a word
 * whose first token is t0 in the window's text is s->tokens[base + t0].
 */
static int
give_words(struct align_seg *s, int n_text, int base, struct wlist *l,
    int *next, double offset, char *err)
{
	int saved = 0, k;

	s->words = calloc(l->n ? l->n : 1, sizeof(*s->words));
	s->word_tokens = calloc(l->n ? l->n : 1, sizeof(int));
	if (s->words == NULL || s->word_tokens == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (; *next < l->n && saved < n_text; (*next)++) {
		struct wt *w = &l->w[*next];

		saved += w->n;
		if (w->word[0] == '\0')
			continue;
		k = s->n_words++;
		s->word_tokens[k] = w->n;
		s->words[k].word = w->word;
		w->word = NULL;
		s->words[k].start = round2(offset + w->start);
		s->words[k].end = round2(offset + w->end);
		s->words[k].probability = (float)w->prob;
		s->words[k].token_index = base + w->t0;
	}
	return 0;
}

/* Times and probabilities of l's words from the aligned tokens. */
static void
time_words(struct wlist *l, const float *jump, const float *prob)
{
	int i, k;

	for (i = 0; i < l->n; i++) {
		struct wt *w = &l->w[i];
		double sum = 0.0;

		w->start = jump[w->t0];
		w->end = jump[w->t0 + w->n];
		for (k = 0; k < w->n; k++)
			sum += prob[w->t0 + k];
		w->prob = w->n > 0 ? sum / w->n : 0.0;
	}
}

/*
 * The text tokens of segs (and eot after them) into text; their number.
 * Per segment: how many (per_seg) and, for give_words(), the index in its
 * tokens of its first text token less that token's index in text (base).
 */
static int
window_text(const struct sotto_model *m, const struct align_seg *segs,
    int n_segs, int32_t *text, int *per_seg, int *base)
{
	int32_t eot = tok_specials(m->tok)->eot;
	int n = 0, i, k;

	for (i = 0; i < n_segs; i++) {
		per_seg[i] = 0;
		base[i] = -n;
		for (k = 0; k < segs[i].n_tokens; k++)
			if (segs[i].tokens[k] < eot) {
				if (per_seg[i]++ == 0)
					base[i] = k - n;
				text[n++] = segs[i].tokens[k];
			}
	}
	text[n] = eot;
	return n;
}

/* Align, split, time and merge the words of text[n] into l. */
static int
window_words(struct sotto_state *st, const struct words_opts *o,
    const int32_t *text, int n, size_t n_frames, struct wlist *l,
    char *err)
{
	float *jump = malloc((n + 1) * sizeof(float));
	float *prob = malloc((n + 1) * sizeof(float));
	int rc;

	if (jump == NULL || prob == NULL)
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
	else if ((rc = align_window(st, o->language, o->task, text, n,
	    n_frames, jump, prob, err)) == 0 &&
	    (rc = split_words(st->model, o->language, text, n + 1, l,
	    err)) == 0) {
		/* the last word is <|endoftext|> */
		free(l->w[--l->n].word);
		time_words(l, jump, prob);
	}
	free(jump);
	free(prob);
	return rc;
}

int
words_window(struct sotto_state *st, const struct words_opts *o,
    struct align_seg *segs, int n_segs, double offset, size_t n_frames,
    double *last_speech, char *err)
{
	struct wlist l = { 0 };
	int32_t *text;
	int *per_seg, *base, n, i, next = 0, rc = 0;
	double med;

	for (i = 0, n = 0; i < n_segs; i++)
		n += segs[i].n_tokens;
	text = malloc((n + 1) * sizeof(int32_t));
	per_seg = malloc((n_segs ? n_segs : 1) * sizeof(int));
	base = malloc((n_segs ? n_segs : 1) * sizeof(int));
	if (text == NULL || per_seg == NULL || base == NULL) {
		rc = err_set(err, SOTTO_ENOMEM, "out of memory");
		goto out;
	}
	if ((n = window_text(st->model, segs, n_segs, text, per_seg,
	    base)) == 0)
		goto out;
	if ((rc = window_words(st, o, text, n, n_frames, &l, err)) != 0)
		goto out;
	med = median_duration(&l);
	if (med > 0.0)
		clip_sentence_ends(&l, 2 * med);
	if ((rc = merge_punctuation(&l, o->prepend ? o->prepend : PREPEND,
	    o->append ? o->append : APPEND, err)) != 0)
		goto out;
	for (i = 0; i < n_segs && rc == 0; i++) {
		rc = give_words(&segs[i], per_seg[i], base[i], &l, &next,
		    offset, err);
		if (rc == 0)
			fit_segment(&segs[i], med, 2 * med, last_speech);
	}
out:
	wlist_free(&l);
	free(text);
	free(per_seg);
	free(base);
	return rc;
}

void
words_free(struct sotto_word *w, int n)
{
	int i;

	for (i = 0; w != NULL && i < n; i++)
		free(w[i].word);
	free(w);
}

void
align_seg_clear(struct align_seg *s)
{
	words_free(s->words, s->n_words);
	free(s->word_tokens);
	s->words = NULL;
	s->word_tokens = NULL;
	s->n_words = 0;
}
