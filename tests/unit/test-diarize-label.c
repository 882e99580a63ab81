/*
 * Unit tests for lib/decode/diarize-label.c: words take their piece's
 * speaker, a segment with two speakers is split at the change (text,
 * times, words, tokens), speakers are numbered in order of first
 * appearance, and the result frees cleanly (build-asan checks leaks).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "diarize.h"

#define RATE	SOTTO_SAMPLE_RATE

/*
 * A segment of words, one a second from t0; its tokens a timestamp, a
 * token per word (1000 + its index) and a timestamp.
 */
static void
segment(struct sotto_segment *s, const char *const *words, int n, double t0)
{
	size_t len = 1;
	int i;

	memset(s, 0, sizeof(*s));
	s->words = calloc(n, sizeof(*s->words));
	assert_non_null(s->words);
	for (i = 0; i < n; i++) {
		s->words[i].word = strdup(words[i]);
		s->words[i].start = t0 + i;
		s->words[i].end = t0 + i + 1;
		s->words[i].token_index = 1 + i;
		len += strlen(words[i]);
	}
	s->n_words = n;
	s->text = calloc(len, 1);
	for (i = 0; i < n; i++)
		strcat(s->text, words[i]);
	s->tokens = calloc(n + 2, sizeof(int32_t));
	assert_non_null(s->tokens);
	s->tokens[0] = 50364;
	for (i = 0; i < n; i++)
		s->tokens[1 + i] = 1000 + i;
	s->tokens[n + 1] = 50400;
	s->n_tokens = n + 2;
	s->start = t0;
	s->end = t0 + n;
	s->avg_logprob = -0.25f;
}

static struct sotto_result *
two_segments(void)
{
	static const char *const a[] = { " One", " two", " three", " four" };
	static const char *const b[] = { " five" };
	struct sotto_result *r = calloc(1, sizeof(*r));

	assert_non_null(r);
	r->segments = calloc(2, sizeof(*r->segments));
	assert_non_null(r->segments);
	segment(&r->segments[0], a, 4, 0.0);
	segment(&r->segments[1], b, 1, 4.0);
	r->n_segments = 2;
	r->language = strdup("en");
	return r;
}

/* Group 1 speaks the first 2 s, group 0 the rest: split, S1 then S2. */
static void
test_split(void **state)
{
	const struct diar_piece p[] = {
		{ 0, 2 * RATE, 1 }, { 2 * RATE, 5 * RATE, 0 },
	};
	struct sotto_result *r = two_segments();
	struct sotto_segment *s;

	(void)state;
	assert_int_equal(diarize_label(r, p, 2, NULL), 0);
	assert_int_equal(r->n_segments, 3);
	s = r->segments;
	assert_string_equal(s[0].text, " One two");
	assert_string_equal(s[1].text, " three four");
	assert_string_equal(s[2].text, " five");
	assert_int_equal(s[0].speaker, 1);
	assert_int_equal(s[1].speaker, 2);
	assert_int_equal(s[2].speaker, 2);
	assert_int_equal(s[0].n_words, 2);
	assert_int_equal(s[1].n_words, 2);
	assert_int_equal(s[0].words[1].speaker, 1);
	assert_int_equal(s[1].words[0].speaker, 2);
	assert_true(s[0].start == 0.0 && s[0].end == 2.0);
	assert_true(s[1].start == 2.0 && s[1].end == 4.0);
	/* the timestamps stay at the ends */
	assert_int_equal(s[0].n_tokens, 3);
	assert_int_equal(s[0].tokens[0], 50364);
	assert_int_equal(s[0].tokens[2], 1001);
	assert_int_equal(s[1].n_tokens, 3);
	assert_int_equal(s[1].tokens[0], 1002);
	assert_int_equal(s[1].tokens[2], 50400);
	assert_int_equal(s[2].n_tokens, 3);	/* not split: kept */
	assert_true(s[1].avg_logprob == -0.25f);
	sotto_result_free(r);
}

/* Words that do not say where their tokens are: parts without tokens. */
static void
test_no_token_indexes(void **state)
{
	const struct diar_piece p[] = {
		{ 0, 2 * RATE, 0 }, { 2 * RATE, 5 * RATE, 1 },
	};
	struct sotto_result *r = two_segments();
	int j;

	(void)state;
	for (j = 0; j < 4; j++)
		r->segments[0].words[j].token_index = 0;
	assert_int_equal(diarize_label(r, p, 2, NULL), 0);
	assert_int_equal(r->n_segments, 3);
	assert_int_equal(r->segments[0].n_tokens, 0);
	assert_int_equal(r->segments[1].n_tokens, 0);
	assert_string_equal(r->segments[1].text, " three four");
	sotto_result_free(r);
}

/* One speaker: nothing split; a word between pieces takes the nearest. */
static void
test_one_speaker_and_gaps(void **state)
{
	const struct diar_piece p[] = {
		{ 0, RATE, 0 }, { 4 * RATE + RATE / 2, 5 * RATE, 0 },
	};
	struct sotto_result *r = two_segments();
	int j;

	(void)state;
	assert_int_equal(diarize_label(r, p, 2, NULL), 0);
	assert_int_equal(r->n_segments, 2);
	for (j = 0; j < 4; j++)
		assert_int_equal(r->segments[0].words[j].speaker, 1);
	assert_int_equal(r->segments[1].speaker, 1);
	sotto_result_free(r);
}

/* Each word its own speaker in turn: a part per word, numbered 1, 2. */
static void
test_alternating(void **state)
{
	const struct diar_piece p[] = {
		{ 0, RATE, 3 }, { RATE, 2 * RATE, 0 }, { 2 * RATE, 3 * RATE, 3 },
		{ 3 * RATE, 4 * RATE, 0 }, { 4 * RATE, 5 * RATE, 2 },
	};
	struct sotto_result *r = two_segments();
	int i;

	(void)state;
	assert_int_equal(diarize_label(r, p, 5, NULL), 0);
	assert_int_equal(r->n_segments, 5);
	for (i = 0; i < 4; i++)
		assert_int_equal(r->segments[i].speaker, 1 + i % 2);
	assert_int_equal(r->segments[4].speaker, 3);
	assert_string_equal(r->segments[2].text, " three");
	sotto_result_free(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_no_token_indexes),
		cmocka_unit_test(test_one_speaker_and_gaps),
		cmocka_unit_test(test_alternating),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
