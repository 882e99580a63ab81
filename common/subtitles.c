/*
 * SubRip and WebVTT cues from words (sotto transcribe --word-timestamps),
 * laid out as openai/whisper's subtitle writers do: words fill a line up
 * to --max-line-width characters, a cue holds up to --max-line-count
 * lines and breaks at a pause of more than 3 s; without both options a
 * cue is a segment. --highlight-words writes a cue per word with that
 * word underlined (<u>...</u>), and the cue's text between words.
 *
 * ref: whisper/utils.py SubtitlesWriter.iterate_result().
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

#define LONG_PAUSE	3.0	/* seconds between words that start a cue */

/* A word of a cue as written: a line break before it, or not. */
struct cue_word {
	const struct sotto_word *w;
	const char *text;	/* w->word, or w->word without white space */
	int len;		/* bytes of text */
	int newline;		/* "\n" before text */
};

struct cue {
	struct cue_word *words;
	int n;
};

static int
is_space(unsigned char c)
{
	return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Characters (UTF-8 code points) of s[n]. */
static int
chars(const char *s, int n)
{
	int i, c = 0;

	for (i = 0; i < n; i++)
		c += ((unsigned char)s[i] & 0xc0) != 0x80;
	return c;
}

/* s without leading and trailing white space, as s[ret]. */
static int
strip(const char **s)
{
	const char *p = *s;
	int n;

	while (is_space((unsigned char)*p))
		p++;
	n = (int)strlen(p);
	while (n > 0 && is_space((unsigned char)p[n - 1]))
		n--;
	*s = p;
	return n;
}

static void
timestamp(char *buf, size_t len, double t, int srt)
{
	long ms = lround(t * 1000.0);

	snprintf(buf, len, "%02ld:%02ld:%02ld%c%03ld", ms / 3600000,
	    ms / 60000 % 60, ms / 1000 % 60, srt ? ',' : '.', ms % 1000);
}

/* One cue: its times and text; underline: the word to underline or -1. */
static void
write_cue(FILE *f, int srt, int *index, double start, double end,
    const struct cue *c, int underline)
{
	char a[32], b[32];
	const char *t;
	int i, n;

	timestamp(a, sizeof(a), start, srt);
	timestamp(b, sizeof(b), end, srt);
	if (srt)
		fprintf(f, "%d\n", ++*index);
	fprintf(f, "%s --> %s\n", a, b);
	output_cue_speaker(f, c->n > 0 ? c->words[0].w->speaker : 0, srt);
	for (i = 0; i < c->n; i++) {
		t = c->words[i].text;
		n = c->words[i].len;
		if (c->words[i].newline)
			fputc('\n', f);
		if (i != underline) {
			fwrite(t, 1, n, f);
			continue;
		}
		for (; n > 0 && is_space((unsigned char)*t); t++, n--)
			fputc(*t, f);
		fprintf(f, "<u>%.*s</u>", n, t);
	}
	fputs("\n\n", f);
}

/*
 * A cue as a whole, or with highlighting a cue per word (and the plain
 * cue over the gaps between words), as openai writes them.
 */
static void
emit(FILE *f, int srt, int *index, const struct cue *c,
    const struct output_opts *o)
{
	char last[32], s[32], e[32];
	int i;

	if (c->n == 0)
		return;
	if (!o->highlight_words) {
		write_cue(f, srt, index, c->words[0].w->start,
		    c->words[c->n - 1].w->end, c, -1);
		return;
	}
	/* times compared as written, as openai compares its strings */
	timestamp(last, sizeof(last), c->words[0].w->start, srt);
	for (i = 0; i < c->n; i++) {
		const struct sotto_word *w = c->words[i].w;

		timestamp(s, sizeof(s), w->start, srt);
		timestamp(e, sizeof(e), w->end, srt);
		if (strcmp(last, s) != 0)
			write_cue(f, srt, index, i > 0 ? c->words[i - 1].w->end :
			    c->words[0].w->start, w->start, c, -1);
		write_cue(f, srt, index, w->start, w->end, c, i);
		memcpy(last, e, sizeof(last));
	}
}

/* The first word's start, as openai's get_start(); else 0. */
static double
first_start(const struct sotto_result *r)
{
	int i;

	for (i = 0; i < r->n_segments; i++)
		if (r->segments[i].n_words > 0)
			return r->segments[i].words[0].start;
	return r->n_segments > 0 ? r->segments[0].start : 0.0;
}

/* State of the layout while words are added. */
struct layout {
	const struct output_opts *o;
	int preserve_segments, max_width;
	int line_len, line_count;
	double last;
	struct cue cue;
};

/* Add word w (index i in its segment); a full cue is written first. */
static void
add_word(FILE *f, int srt, int *index, struct layout *l,
    const struct sotto_word *w, int i)
{
	struct cue_word *cw = &l->cue.words[l->cue.n];
	int long_pause = !l->preserve_segments && w->start - l->last >
	    LONG_PAUSE;
	int len = (int)strlen(w->word);
	int has_room = l->line_len + chars(w->word, len) <= l->max_width;
	/* a cue is one speaker's */
	int seg_break = l->cue.n > 0 && ((i == 0 && l->preserve_segments) ||
	    w->speaker != l->cue.words[0].w->speaker);

	cw->w = w;
	cw->text = w->word;
	cw->len = len;
	cw->newline = 0;
	if (l->line_len > 0 && has_room && !long_pause && !seg_break) {
		l->line_len += chars(w->word, len);
	} else {
		cw->len = strip(&cw->text);
		if ((l->cue.n > 0 && l->o->max_line_count > 0 && (long_pause ||
		    l->line_count >= l->o->max_line_count)) || seg_break) {
			emit(f, srt, index, &l->cue, l->o);
			memmove(l->cue.words, cw, sizeof(*cw));
			cw = l->cue.words;
			l->cue.n = 0;
			l->line_count = 1;
		} else if (l->line_len > 0) {
			l->line_count++;
			cw->newline = 1;
		}
		l->line_len = chars(cw->text, cw->len);
	}
	l->cue.n++;
	l->last = w->start;
}

void
subtitles_write_words(FILE *f, const struct sotto_result *r, int srt,
    const struct output_opts *o)
{
	struct layout l = { 0 };
	int i, j, n = 0, index = 0;

	for (i = 0; i < r->n_segments; i++)
		n += r->segments[i].n_words;
	if ((l.cue.words = calloc(n + 1, sizeof(*l.cue.words))) == NULL)
		return;
	l.o = o;
	l.preserve_segments = o->max_line_count <= 0 ||
	    o->max_line_width <= 0;
	l.max_width = o->max_line_width > 0 ? o->max_line_width : 1000;
	l.line_count = 1;
	l.last = first_start(r);
	if (!srt)
		fprintf(f, "WEBVTT\n\n");
	for (i = 0; i < r->n_segments; i++)
		for (j = 0; j < r->segments[i].n_words; j++)
			add_word(f, srt, &index, &l, &r->segments[i].words[j],
			    j);
	emit(f, srt, &index, &l.cue, o);
	free(l.cue.words);
}
