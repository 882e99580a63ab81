/*
 * Unit tests for common/caption.c: finals of a few words become units
 * that close at sentence ends (not after "Mr." or an initial), at a
 * clause mark once a line is full, before the length or time limit, at
 * a pause (before a word, or seen at a step), and at the end; the closed
 * units hold every final's text once, in order; the open unit is emitted
 * only when it changed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "caption.h"

#define MAX_SEEN	64

struct seen {
	int		 n;
	struct {
		int64_t	 id, first, last;
		double	 start, end;
		char	 text[256], tentative[256];
		int	 closed, speaker;
	} u[MAX_SEEN];
};

static void
record(void *arg, const struct caption_unit *u)
{
	struct seen *s = arg;

	assert_true(s->n < MAX_SEEN);
	s->u[s->n].id = u->id;
	s->u[s->n].first = u->first_final;
	s->u[s->n].last = u->last_final;
	s->u[s->n].start = u->start;
	s->u[s->n].end = u->end;
	snprintf(s->u[s->n].text, sizeof(s->u[0].text), "%s", u->text);
	snprintf(s->u[s->n].tentative, sizeof(s->u[0].tentative), "%s",
	    u->tentative);
	s->u[s->n].closed = u->closed;
	s->u[s->n].speaker = u->speaker;
	s->n++;
}

/* The closed units' text, concatenated. */
static void
closed_text(const struct seen *s, char *buf, size_t len)
{
	int i;

	buf[0] = '\0';
	for (i = 0; i < s->n; i++)
		if (s->u[i].closed)
			strncat(buf, s->u[i].text, len - strlen(buf) - 1);
}

static void
test_sentences(void **state)
{
	static const char *finals[] = { " Printing, in the", " only sense.",
	    " And it is", " worth it. Mr. Smith", " said so." };
	struct caption c;
	struct seen s = { 0 };
	char all[512] = "", got[512];
	int i;

	(void)state;
	caption_init(&c, record, &s);
	for (i = 0; i < 5; i++) {
		caption_final(&c, i, i, i + 1.0, finals[i]);
		strcat(all, finals[i]);
		caption_partial(&c, "", i + 1.0, i + 1.2);
	}
	caption_flush(&c);
	closed_text(&s, got, sizeof(got));
	assert_string_equal(got, all);
	/* three closed units: two sentences, and the one after "Mr." */
	for (i = 0; i < s.n && !s.u[i].closed; i++)
		;
	assert_string_equal(s.u[i].text, " Printing, in the only sense.");
	assert_int_equal(s.u[i].first, 0);
	assert_int_equal(s.u[i].last, 1);
	assert_true(s.u[i].start == 0.0 && s.u[i].end == 2.0);
	for (i++; i < s.n && !s.u[i].closed; i++)
		;
	/* the sentence end inside final 3 splits it */
	assert_string_equal(s.u[i].text, " And it is worth it.");
	assert_int_equal(s.u[i].id, 1);
	for (i++; i < s.n && !s.u[i].closed; i++)
		;
	assert_string_equal(s.u[i].text, " Mr. Smith said so.");
	assert_int_equal(s.u[i].first, 3);
	assert_true(s.u[i].start > 3.0 && s.u[i].start < 4.0);
	caption_free(&c);
}

static void
test_length_and_clause(void **state)
{
	struct caption c;
	struct seen s = { 0 };
	char buf[64], all[2048] = "", got[2048];
	int i, k;

	(void)state;
	caption_init(&c, record, &s);
	/* 30 words of 7 characters, no punctuation, 0.2 s each */
	for (i = 0; i < 30; i++) {
		snprintf(buf, sizeof(buf), " word%02d", i);
		caption_final(&c, i, i * 0.2, i * 0.2 + 0.2, buf);
		strcat(all, buf);
	}
	caption_flush(&c);
	closed_text(&s, got, sizeof(got));
	assert_string_equal(got, all);
	for (i = k = 0; i < s.n; i++) {
		assert_true(strlen(s.u[i].text) <= CAPTION_MAX_CHARS);
		k += s.u[i].closed;
	}
	assert_int_equal(k, 3);		/* 12 words of 7 fill 84 */
	assert_int_equal(strlen(s.u[0].text), 84);
	caption_free(&c);

	/* a comma closes once the first line is full, not before */
	memset(&s, 0, sizeof(s));
	caption_init(&c, record, &s);
	caption_final(&c, 0, 0, 1, " One, two");
	caption_final(&c, 1, 1, 4, " and a longer clause of thirty-odd "
	    "characters, then");
	caption_flush(&c);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.u[0].text, " One, two and a longer clause of "
	    "thirty-odd characters,");
	assert_string_equal(s.u[1].text, " then");
	caption_free(&c);

	/* 7 s at most */
	memset(&s, 0, sizeof(s));
	caption_init(&c, record, &s);
	caption_final(&c, 0, 0, 4, " slow words");
	caption_final(&c, 1, 4, 7.5, " slower still");
	caption_flush(&c);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.u[0].text, " slow words slower");
	assert_string_equal(s.u[1].text, " still");
	caption_free(&c);
}

static void
test_pause_and_open(void **state)
{
	struct caption c;
	struct seen s = { 0 };

	(void)state;
	caption_init(&c, record, &s);
	caption_partial(&c, "", 0, 1.0);
	assert_int_equal(s.n, 0);		/* nothing to show */
	caption_partial(&c, " hello there", 0.2, 1.0);
	assert_int_equal(s.n, 1);
	assert_false(s.u[0].closed);
	assert_string_equal(s.u[0].text, "");
	assert_string_equal(s.u[0].tentative, " hello there");
	caption_partial(&c, " hello there", 0.2, 2.0);
	assert_int_equal(s.n, 1);		/* unchanged: not sent again */
	caption_final(&c, 0, 0.2, 0.8, " hello");
	caption_partial(&c, " there", 0.8, 2.0);
	assert_int_equal(s.n, 2);
	assert_string_equal(s.u[1].text, " hello");
	assert_string_equal(s.u[1].tentative, " there");
	caption_final(&c, 1, 0.8, 1.2, " there");
	caption_partial(&c, "", 1.2, 2.6);	/* 1.4 s: not yet quiet */
	assert_int_equal(s.n, 3);
	assert_false(s.u[2].closed);
	caption_partial(&c, "", 1.2, 2.6);
	assert_int_equal(s.n, 3);		/* unchanged */
	caption_partial(&c, "", 1.2, 3.3);	/* 2.1 s: quiet */
	assert_int_equal(s.n, 4);
	assert_true(s.u[3].closed);
	assert_string_equal(s.u[3].text, " hello there");
	assert_int_equal(s.u[3].id, 0);
	/* a pause of 0.8 s before a word also closes */
	caption_final(&c, 2, 3.0, 3.5, " again");
	caption_final(&c, 3, 4.4, 5.5, " later");
	assert_int_equal(s.n, 5);
	assert_string_equal(s.u[4].text, " again");
	assert_int_equal(s.u[4].id, 1);
	caption_flush(&c);
	assert_string_equal(s.u[5].text, " later");
	assert_true(s.u[5].closed);
	caption_flush(&c);			/* nothing open: nothing */
	assert_int_equal(s.n, 6);
	caption_free(&c);
}

/*
 * Live speaker labels: a change of speaker closes the unit, even inside
 * a sentence; each unit carries its finals' speaker, also while open.
 */
static void
test_speakers(void **state)
{
	struct caption c;
	struct seen s = { 0 };
	int i;

	(void)state;
	caption_init(&c, record, &s);
	caption_speaker(&c, 1);
	caption_final(&c, 0, 0, 1, " We went");
	caption_partial(&c, " to", 1, 1.5);
	caption_speaker(&c, 1);
	caption_final(&c, 1, 1, 2, " to the");
	caption_speaker(&c, 2);
	caption_final(&c, 2, 2.1, 3, " Where?");
	caption_speaker(&c, 1);
	caption_final(&c, 3, 3.2, 4, " market");
	caption_flush(&c);
	for (i = 0; i < s.n; i++)
		if (s.u[i].closed)
			break;
	assert_true(i < s.n);
	assert_string_equal(s.u[i].text, " We went to the");
	assert_int_equal(s.u[i].speaker, 1);
	assert_int_equal(s.u[i].last, 1);
	for (i++; i < s.n && !s.u[i].closed; i++)
		;
	assert_string_equal(s.u[i].text, " Where?");
	assert_int_equal(s.u[i].speaker, 2);
	for (i++; i < s.n && !s.u[i].closed; i++)
		assert_int_equal(s.u[i].speaker, 1);
	assert_string_equal(s.u[i].text, " market");
	assert_int_equal(s.u[i].speaker, 1);
	/* the open units were their speaker's too */
	assert_int_equal(s.u[0].speaker, 1);
	caption_free(&c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sentences),
		cmocka_unit_test(test_length_and_clause),
		cmocka_unit_test(test_pause_and_open),
		cmocka_unit_test(test_speakers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
