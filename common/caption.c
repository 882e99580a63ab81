/*
 * Caption units from a stream's finals and partials (caption.h).
 *
 * Finals are cut where two hypotheses agreed, which is wherever the
 * decoder happened to be, so they are read word by word here: each word
 * joins the open unit, and the unit closes after a word that ends a
 * sentence, after a clause mark (, ; :) once its first line is full,
 * before a word that would pass two caption lines or 7 s, and when the
 * speaker pauses (a gap between two finals' words, or a step that finds
 * nothing said after the last word for a while). Only committed words enter a unit, so what a unit
 * shows as stable never changes and every final's text lands in exactly
 * one unit, in order: the closed units concatenated are the finals
 * concatenated.
 */
#include <stdlib.h>
#include <string.h>

#include "caption.h"

void
caption_init(struct caption *c, caption_emit emit, void *arg)
{
	memset(c, 0, sizeof(*c));
	c->emit = emit;
	c->arg = arg;
	c->first_final = c->last_final = -1;
}

void
caption_free(struct caption *c)
{
	free(c->text);
	free(c->shown);
	memset(c, 0, sizeof(*c));
}

static void
caption_send(struct caption *c, const char *tentative, int closed)
{
	struct caption_unit u;

	u.id = c->next_id;
	u.start = c->len > 0 || closed ? c->start : c->tentative_start;
	u.end = c->len > 0 || closed ? c->end : u.start;
	u.text = c->text != NULL ? c->text : "";
	u.tentative = tentative;
	u.first_final = c->first_final;
	u.last_final = c->last_final;
	u.closed = closed;
	u.speaker = c->len > 0 ? c->speaker : 0;	/* not yet known */
	c->emit(c->arg, &u);
}

/* Close the open unit, if it has committed words, and open the next. */
static void
caption_close(struct caption *c)
{
	if (c->len == 0)
		return;
	caption_send(c, "", 1);
	c->next_id++;
	c->len = 0;
	c->text[0] = '\0';
	c->first_final = c->last_final = -1;
	free(c->shown);
	c->shown = NULL;
	c->shown_len = 0;
}

static int
caption_append(struct caption *c, const char *w, size_t n)
{
	char *p;
	size_t cap;

	if (c->len + n + 1 > c->cap) {
		cap = c->cap > 0 ? c->cap : 128;
		while (cap < c->len + n + 1)
			cap *= 2;
		if ((p = realloc(c->text, cap)) == NULL)
			return -1;
		c->text = p;
		c->cap = cap;
	}
	memcpy(c->text + c->len, w, n);
	c->len += n;
	c->text[c->len] = '\0';
	return 0;
}

/* The last byte of w[0, n) that is not a closing quote or bracket. */
static char
caption_last_mark(const char *w, size_t n)
{
	while (n > 0 && strchr("\"')]", w[n - 1]) != NULL)
		n--;
	/* a closing curly quote (U+201D, U+2019) */
	while (n >= 3 && (unsigned char)w[n - 3] == 0xe2 &&
	    (unsigned char)w[n - 2] == 0x80 &&
	    ((unsigned char)w[n - 1] == 0x9d || (unsigned char)w[n - 1] ==
	    0x99))
		n -= 3;
	if (n >= 3 && (unsigned char)w[n - 3] == 0xe2 &&
	    (unsigned char)w[n - 2] == 0x80 && (unsigned char)w[n - 1] == 0xa6)
		return '.';		/* U+2026 ... */
	if (n >= 3 && (unsigned char)w[n - 3] == 0xe3 &&
	    (unsigned char)w[n - 2] == 0x80 && (unsigned char)w[n - 1] == 0x82)
		return '.';		/* U+3002, the ideographic full stop */
	if (n >= 3 && (unsigned char)w[n - 3] == 0xef &&
	    (unsigned char)w[n - 2] == 0xbc && ((unsigned char)w[n - 1] ==
	    0x81 || (unsigned char)w[n - 1] == 0x9f))
		return '.';		/* U+FF01, U+FF1F: full-width ! ? */
	return n > 0 ? w[n - 1] : '\0';
}

/*
 * Whether the word (its leading blanks included) ends a sentence: a
 * full stop after a title ("Mr.") or an initial ("J.") does not.
 */
static int
caption_sentence_end(const char *w, size_t n)
{
	static const char *const titles[] = { "Mr.", "Mrs.", "Ms.", "Dr.",
	    "St.", "Jr.", "Sr.", "Prof.", "vs.", "etc.", NULL };
	char m = caption_last_mark(w, n);
	int i;

	while (n > 0 && *w == ' ') {
		w++;
		n--;
	}
	if (m == '?' || m == '!')
		return 1;
	if (m != '.')
		return 0;
	if (n == 2 && w[0] >= 'A' && w[0] <= 'Z')
		return 0;
	for (i = 0; titles[i] != NULL; i++)
		if (strlen(titles[i]) == n && strncmp(titles[i], w, n) == 0)
			return 0;
	return 1;
}

static int
caption_clause_end(const char *w, size_t n)
{
	char m = caption_last_mark(w, n);

	return m == ',' || m == ';' || m == ':';
}

/* Characters a reader sees (UTF-8 continuation bytes not counted). */
static size_t
caption_chars(const char *s, size_t n)
{
	size_t i, k = 0;

	for (i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			k++;
	return k;
}

/* One word of final final_id, from t0 to t1 (estimated), into the unit. */
static void
caption_word(struct caption *c, int64_t final_id, const char *w, size_t n,
    double t0, double t1)
{
	size_t chars = caption_chars(c->text != NULL ? c->text : "", c->len);

	if (c->len > 0 && (t0 - c->end >= CAPTION_PAUSE_SECONDS ||
	    chars + caption_chars(w, n) > CAPTION_MAX_CHARS ||
	    t1 - c->start > CAPTION_MAX_SECONDS))
		caption_close(c);
	if (caption_append(c, w, n) != 0) {
		c->oom = 1;
		return;
	}
	if (c->first_final < 0) {
		c->first_final = final_id;
		c->start = t0;
	}
	c->last_final = final_id;
	if (t1 > c->end || c->len == n)
		c->end = t1;
	if (caption_sentence_end(w, n) || (caption_clause_end(w, n) &&
	    caption_chars(c->text, c->len) >= CAPTION_LINE_CHARS))
		caption_close(c);
}

void
caption_final(struct caption *c, int64_t final_id, double start,
    double end, const char *text)
{
	size_t total = strlen(text), at = 0, from;
	double t0 = start, t1;

	if (end < start)
		end = start;
	while (at < total) {
		from = at;
		while (at < total && text[at] == ' ')
			at++;
		while (at < total && text[at] != ' ')
			at++;
		if (at == from)
			break;
		/* the word's share of the segment by its bytes */
		t1 = start + (end - start) * (double)at / (double)total;
		caption_word(c, final_id, text + from, at - from, t0, t1);
		t0 = t1;
	}
}

void
caption_speaker(struct caption *c, int speaker)
{
	if (speaker == c->speaker)
		return;
	caption_close(c);
	c->speaker = speaker;
}

/* Whether what clients saw of the open unit is what it is now. */
static int
caption_unchanged(const struct caption *c, const char *tentative)
{
	return c->shown != NULL && c->shown_len == c->len &&
	    strcmp(c->shown, tentative) == 0;
}

void
caption_partial(struct caption *c, const char *tentative,
    double tentative_start, double audio_time)
{
	double after = tentative[0] != '\0' ? tentative_start : audio_time;
	char *copy;

	if (c->len > 0 && after - c->end >= CAPTION_QUIET_SECONDS)
		caption_close(c);
	c->tentative_start = tentative_start;
	if (caption_unchanged(c, tentative) ||
	    (c->shown == NULL && c->len == 0 && tentative[0] == '\0'))
		return;
	if ((copy = strdup(tentative)) == NULL) {
		c->oom = 1;
		return;
	}
	free(c->shown);
	c->shown = copy;
	c->shown_len = c->len;
	caption_send(c, tentative, 0);
}

void
caption_flush(struct caption *c)
{
	caption_close(c);
}
