/*
 * Unit tests for lib/stream/stream-match.c: where the committed words end
 * in a hypothesis. The vocabulary is the single bytes, the words and
 * marks below (as the decoder's, a word's piece starts with its space)
 * and three timestamps; the stream holds only what the matching reads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "stream.h"
#include "tokenizer.h"

#define N_BYTES		256

static const char *const words[] = {
	" his", " power", " Power", " to", " do", " for", " them",
	" Experience", " proves", " this", " Your", " is", " sufficient",
	" Sufficient", " I", " said", " saidst", " efficient",
	" insufficient", " more", " And", " so", " it", " was", " Then",
	" So", " stop", " Stop", " Go", " on", "said",
};
#define N_WORDS		((int)(sizeof(words) / sizeof(words[0])))
#define N_BPE		(N_BYTES + N_WORDS)

static const char *const specials[] = {
	"<|endoftext|>", "<|startoftranscript|>", "<|translate|>",
	"<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
	"<|nospeech|>", "<|notimestamps|>", "<|0.00|>", "<|0.02|>",
	"<|0.04|>",
};
#define N_VOCAB	(N_BPE + (int)(sizeof(specials) / sizeof(specials[0])))

enum {
	EOT = N_BPE, SOT, TRANSLATE, TRANSCRIBE, SOT_LM, SOT_PREV,
	NO_SPEECH, NO_TIMESTAMPS, TS0
};

static char byte_text[N_BYTES];
static struct tok_piece pieces[N_VOCAB];
static const struct tok_specials sp = {
	.eot = EOT, .sot = SOT, .translate = TRANSLATE,
	.transcribe = TRANSCRIBE, .sot_lm = SOT_LM, .sot_prev = SOT_PREV,
	.no_speech = NO_SPEECH, .no_timestamps = NO_TIMESTAMPS,
	.timestamp_begin = TS0,
};

/* Owned by setup/teardown; the stream is large, so it is on the heap. */
struct fixture {
	struct sotto_model	 model;
	struct sotto_stream	*s;
};

static int
setup(void **state)
{
	struct fixture *f;
	char err[SOTTO_ERR_MAX];
	int i;

	for (i = 0; i < N_BYTES; i++) {
		byte_text[i] = (char)i;
		pieces[i].ptr = &byte_text[i];
		pieces[i].len = 1;
	}
	for (i = 0; i < N_WORDS; i++) {
		pieces[N_BYTES + i].ptr = words[i];
		pieces[N_BYTES + i].len = strlen(words[i]);
	}
	for (i = N_BPE; i < N_VOCAB; i++) {
		pieces[i].ptr = specials[i - N_BPE];
		pieces[i].len = strlen(specials[i - N_BPE]);
	}
	if ((f = calloc(1, sizeof(*f))) == NULL ||
	    (f->s = calloc(1, sizeof(*f->s))) == NULL) {
		free(f);
		return -1;
	}
	if (tok_new(pieces, N_VOCAB, N_BPE, &sp, NULL, 0, &f->model.tok,
	    err) != 0) {
		fprintf(stderr, "tok_new: %s\n", err);
		free(f->s);
		free(f);
		return -1;
	}
	f->s->model = &f->model;
	f->s->tb = TS0;
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	tok_free(f->model.tok);
	free(f->s);
	free(f);
	return 0;
}

/*
 * Tokens of text into t: pieces of words[] or single bytes, each after a
 * '|', or '@', the timestamp TS0 + 1; returns how many (a test's expected index).
 */
static int
tokens(const char *text, int32_t *t)
{
	const char *end;
	size_t len;
	int n = 0, i;

	while (*text != '\0') {
		if (*text == '@') {
			t[n++] = TS0 + 1;
			text++;
			continue;
		}
		assert_int_equal(*text++, '|');
		end = text + strcspn(text, "|@");
		len = (size_t)(end - text);
		if (len == 1) {		/* a mark: its byte */
			t[n++] = (unsigned char)*text++;
			continue;
		}
		for (i = 0; i < N_WORDS; i++)
			if (strlen(words[i]) == len &&
			    memcmp(words[i], text, len) == 0)
				break;
		if (i == N_WORDS)
			fail_msg("no piece \"%.*s\"", (int)len, text);
		t[n++] = N_BYTES + i;
		text = end;
	}
	return n;
}

static int
count(const char *text)
{
	int32_t t[256];

	return tokens(text, t);
}

static void
set_prefix(struct sotto_stream *s, const char *text)
{
	s->n_prefix = tokens(text, s->prefix);
}

/* stream_match_tail of text against the stream's prefix. */
static int
tail(struct sotto_stream *s, const char *text)
{
	int32_t h[256];
	int n = tokens(text, h);

	return stream_match_tail(s, h, n);
}

/* The case it is for: the window's first committed word heard otherwise. */
static void
test_tail_after_other_start(void **state)
{
	struct sotto_stream *s = ((struct fixture *)*state)->s;
	const char *h = "| power| to| do| for| them|.| Experience| proves|"
	    " this|.| Your| power| is| sufficient|,| I| said|.";
	int32_t t[256];
	int n = tokens(h, t);

	set_prefix(s, "| his| power| to| do| for| them|.@| Experience|"
	    " proves| this|.@| Your| power| is| sufficient|,| I| said|.@");
	/* the exact match finds none: the first word differs */
	assert_int_equal(stream_match(s, t, n), -1);
	/* all of it is committed text: nothing after it */
	assert_int_equal(stream_match_tail(s, t, n), n);
}

static void
test_tail_new_words_kept(void **state)
{
	struct sotto_stream *s = ((struct fixture *)*state)->s;

	set_prefix(s, "| his| power| is| sufficient|,| I| said|.");
	/* after the last words and their punctuation, before the new ones */
	assert_int_equal(tail(s, "| Your| power| is| sufficient|,| I| said|."
	    "| And| so| it| was|."), count("| Your| power| is| sufficient|,|"
	    " I| said|."));
	/* spelt otherwise, punctuation aside: the letters decide */
	assert_int_equal(tail(s, "| Sufficient|;| I|-|said|!| Then"),
	    count("| Sufficient|;| I|-|said|!"));
	/*
	 * a timestamp between the words does not hide them; the one after
	 * them is left to what follows (as stream_match leaves it)
	 */
	assert_int_equal(tail(s, "| Sufficient|,@| I| said|.@| Then"),
	    count("| Sufficient|,@| I| said|."));
}

static void
test_tail_whole_words_only(void **state)
{
	struct sotto_stream *s = ((struct fixture *)*state)->s;

	set_prefix(s, "| it| is| sufficient| I| said");
	/* "said" ends inside "saidst" */
	assert_int_equal(tail(s, "| efficient| I| saidst| more"), -1);
	/* "insufficient" does not start with "sufficient" */
	assert_int_equal(tail(s, "| insufficient| I| said| more"), -1);
	/* the first place they are whole words */
	assert_int_equal(tail(s, "| sufficient| I| saidst|,| sufficient| I|"
	    " said| more"), count("| sufficient| I| saidst|,| sufficient| I|"
	    " said"));
}

static void
test_tail_short_and_empty_prefix(void **state)
{
	struct sotto_stream *s = ((struct fixture *)*state)->s;

	/* fewer words than TAIL_WORDS: all of them */
	set_prefix(s, "@| Stop|.@");
	assert_int_equal(tail(s, "| So| stop|.| Go| on|."),
	    count("| So| stop|."));
	assert_int_equal(tail(s, "| Go| on|."), -1);
	/* no words committed: nothing to find */
	set_prefix(s, "@|.@");
	assert_int_equal(tail(s, "| Go| on|."), -1);
	set_prefix(s, "");
	assert_int_equal(tail(s, "| Go| on|."), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_tail_after_other_start,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_tail_new_words_kept,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_tail_whole_words_only,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(
		    test_tail_short_and_empty_prefix, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
