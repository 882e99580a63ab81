/*
 * A transcript labelled from its pieces' speakers (diarize.c): each word
 * takes the speaker of the piece its middle falls in, a segment those of
 * its words, split into parts at each change of speaker. The parts keep
 * the segment's scores; their text is their words' joined (Whisper's
 * segment text is its words' too, byte for byte, as words.c makes them)
 * and their tokens the segment's from their first word's token_index
 * (the first part from the segment's first token, the last to its last:
 * the timestamps stay at the ends). Speakers are then numbered 1, 2, ...
 * in order of first appearance.
 */
#include <stdlib.h>
#include <string.h>

#include "diarize.h"
#include "err.h"

/* The piece t (seconds) falls in, else the nearest; pieces sorted. */
static int
piece_at(const struct diar_piece *p, int n, double t)
{
	double s = t * SOTTO_SAMPLE_RATE, before, after;
	int lo = 0, hi = n - 1, mid;

	if (n == 0)
		return -1;
	while (lo < hi) {	/* the last piece starting at or before s */
		mid = (lo + hi + 1) / 2;
		if ((double)p[mid].start <= s)
			lo = mid;
		else
			hi = mid - 1;
	}
	if ((double)p[lo].start > s || s < (double)p[lo].end)
		return lo;
	if (lo + 1 == n)
		return lo;
	before = s - (double)p[lo].end;
	after = (double)p[lo + 1].start - s;
	return after < before ? lo + 1 : lo;
}

/* Raw speakers (group + 1) of every word, and of segments without. */
static void
label_words(struct sotto_result *res, const struct diar_piece *p, int n)
{
	struct sotto_segment *s;
	int i, j, k;

	for (i = 0; i < res->n_segments; i++) {
		s = &res->segments[i];
		for (j = 0; j < s->n_words; j++) {
			k = piece_at(p, n, (s->words[j].start +
			    s->words[j].end) / 2.0);
			s->words[j].speaker = k >= 0 ? p[k].label + 1 : 1;
		}
		k = piece_at(p, n, (s->start + s->end) / 2.0);
		s->speaker = s->n_words > 0 ? s->words[0].speaker :
		    k >= 0 ? p[k].label + 1 : 1;
	}
}

/* Parts of a segment: 1 + its changes of speaker. */
static int
parts_of(const struct sotto_segment *s)
{
	int j, n = 1;

	for (j = 1; j < s->n_words; j++)
		n += s->words[j].speaker != s->words[j - 1].speaker;
	return n;
}

/*
 * Whether s's words say where their tokens are: each word has at least
 * one, so their indexes go up, inside the segment's tokens. (A caller's
 * own words may have none: the parts then have no tokens.)
 */
static int
tokens_known(const struct sotto_segment *s)
{
	int j;

	for (j = 0; j < s->n_words; j++)
		if (s->words[j].token_index < (j > 0 ?
		    s->words[j - 1].token_index + 1 : 0) ||
		    s->words[j].token_index >= s->n_tokens)
			return 0;
	return 1;
}

/* The part of s with words [a, b) into out (new text, tokens, words). */
static int
make_part(const struct sotto_segment *s, int a, int b,
    struct sotto_segment *out, char *err)
{
	int t0 = a == 0 ? 0 : s->words[a].token_index;
	int t1 = b == s->n_words ? s->n_tokens : s->words[b].token_index;
	size_t len = 1;
	char *p;
	int j;

	for (j = a; j < b; j++)
		len += strlen(s->words[j].word);
	if (!tokens_known(s))
		t0 = t1 = 0;
	*out = *s;
	out->n_tokens = t1 - t0;
	out->tokens = malloc((t1 - t0 ? t1 - t0 : 1) * sizeof(int32_t));
	out->text = malloc(len);
	out->words = malloc((b - a) * sizeof(*out->words));
	if (out->tokens == NULL || out->text == NULL || out->words == NULL) {
		free(out->tokens);
		free(out->text);
		free(out->words);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	memcpy(out->tokens, s->tokens + t0, (t1 - t0) * sizeof(int32_t));
	for (j = a, p = out->text; j < b; j++)
		p = stpcpy(p, s->words[j].word);
	*p = '\0';
	memcpy(out->words, s->words + a, (b - a) * sizeof(*out->words));
	out->n_words = b - a;
	out->start = a == 0 ? s->start : s->words[a].start;
	out->end = b == s->n_words ? s->end : s->words[b - 1].end;
	out->speaker = s->words[a].speaker;
	return 0;
}

/* A part split_segment() made, freed (its words' strings are not). */
static void
part_free(struct sotto_segment *p)
{
	free(p->tokens);
	free(p->text);
	free(p->words);
}

/* s as its parts at out[]; returns how many, or SOTTO_ENOMEM. */
static int
split_segment(const struct sotto_segment *s, struct sotto_segment *out,
    char *err)
{
	int a = 0, b, n = 0, rc;

	for (b = 1; b <= s->n_words; b++) {
		if (b < s->n_words && s->words[b].speaker ==
		    s->words[b - 1].speaker)
			continue;
		if ((rc = make_part(s, a, b, &out[n], err)) != 0) {
			while (n-- > 0)
				part_free(&out[n]);
			return rc;
		}
		n++;
		a = b;
	}
	return n;
}

/*
 * What split_segments() made of res's first i segments at segs[] taken
 * back: a segment of one speaker is a copy, the others' parts are freed.
 */
static void
unsplit(const struct sotto_result *res, int i, struct sotto_segment *segs)
{
	int j, k, m = 0, n;

	for (j = 0; j < i; j++) {
		n = parts_of(&res->segments[j]);
		for (k = 0; n > 1 && k < n; k++)
			part_free(&segs[m + k]);
		m += n;
	}
}

/* Every segment with two speakers or more split into res's new array. */
static int
split_segments(struct sotto_result *res, char *err)
{
	struct sotto_segment *segs, *s;
	int i, n = 0, m = 0, rc;

	for (i = 0; i < res->n_segments; i++)
		n += parts_of(&res->segments[i]);
	if (n == res->n_segments)
		return 0;
	if ((segs = malloc(n * sizeof(*segs))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	for (i = 0; i < res->n_segments; i++) {
		s = &res->segments[i];
		if (parts_of(s) == 1) {
			segs[m++] = *s;
			continue;
		}
		if ((rc = split_segment(s, segs + m, err)) < 0) {
			unsplit(res, i, segs);
			free(segs);
			return rc;
		}
		m += rc;
	}
	for (i = 0; i < res->n_segments; i++) {
		s = &res->segments[i];
		if (parts_of(s) == 1)
			continue;
		free(s->text);
		free(s->tokens);
		free(s->words);		/* the words' strings are the parts' */
	}
	free(res->segments);
	res->segments = segs;
	res->n_segments = n;
	return 0;
}

/*
 * Raw speakers renumbered 1, 2, ... in order of first appearance; map
 * has a zero for each raw speaker.
 */
static void
renumber(struct sotto_result *res, int *map)
{
	int next = 1, i, j;
	struct sotto_segment *s;

	for (i = 0; i < res->n_segments; i++) {
		s = &res->segments[i];
		if (map[s->speaker] == 0)
			map[s->speaker] = next++;
		s->speaker = map[s->speaker];
		for (j = 0; j < s->n_words; j++)
			s->words[j].speaker = s->speaker;
	}
}

int
diarize_label(struct sotto_result *res, const struct diar_piece *pieces,
    int n, char *err)
{
	int i, max_raw = 1, *map, rc;

	for (i = 0; i < n; i++)
		if (pieces[i].label + 1 > max_raw)
			max_raw = pieces[i].label + 1;
	if ((map = calloc(max_raw + 1, sizeof(int))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	label_words(res, pieces, n);
	if ((rc = split_segments(res, err)) == 0)
		renumber(res, map);
	free(map);
	return rc;
}
