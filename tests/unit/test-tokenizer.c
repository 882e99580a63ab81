/*
 * Unit tests for lib/model/tokenizer.c on a small hand-made vocabulary: ids
 * 0..255 are the single bytes, then a few merges, then the specials.
 * Expected strings were computed with Python (bytes.decode("utf-8",
 * errors="replace") and the GPT-2 pattern under the `regex` module);
 * tests/tokenizer/test_tokenizer_real.py covers the real vocabularies.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sotto.h"
#include "tokenizer.h"

#define N_BYTES		256

/* Merges from id 256 on; their position is their rank. */
static const char *const merges[] = {
	"bc",		/* 256 */
	"ab",		/* 257 */
	"xy",		/* 258 */
	"yz",		/* 259 */
	"he",		/* 260 */
	"ll",		/* 261 */
	"hell",		/* 262 */
	"aa",		/* 263 */
	" w",		/* 264 */
	" h",		/* 265 */
	"qq",		/* 266 */
	"qqq",		/* 267 */
	"qrs",		/* 268 */
	"'s",		/* 269 */
};
#define N_MERGES	((int)(sizeof(merges) / sizeof(merges[0])))
#define N_BPE		(N_BYTES + N_MERGES)

static const char *const specials[] = {
	"<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|de|>",
	"<|translate|>", "<|transcribe|>", "<|startoflm|>", "<|startofprev|>",
	"<|nospeech|>", "<|notimestamps|>", "<|0.00|>", "<|0.02|>", "<|0.04|>",
	"<|0.06|>",
};
#define N_VOCAB		(N_BPE + (int)(sizeof(specials) / sizeof(specials[0])))

enum {
	EOT = N_BPE, SOT, LANG_EN, LANG_DE, TRANSLATE, TRANSCRIBE, SOT_LM,
	SOT_PREV, NO_SPEECH, NO_TIMESTAMPS, TS0
};

static char byte_text[N_BYTES];
static struct tok_piece pieces[N_VOCAB];
static const struct tok_specials sp = {
	.eot = EOT, .sot = SOT, .translate = TRANSLATE,
	.transcribe = TRANSCRIBE, .sot_lm = SOT_LM, .sot_prev = SOT_PREV,
	.no_speech = NO_SPEECH, .no_timestamps = NO_TIMESTAMPS,
	.timestamp_begin = TS0,
};
static const struct tok_piece langs[] = { { "en", 2 }, { "de", 2 } };

static void
vocab_init(void)
{
	int i;

	for (i = 0; i < N_BYTES; i++) {
		byte_text[i] = (char)i;
		pieces[i].ptr = &byte_text[i];
		pieces[i].len = 1;
	}
	for (i = 0; i < N_MERGES; i++) {
		pieces[N_BYTES + i].ptr = merges[i];
		pieces[N_BYTES + i].len = strlen(merges[i]);
	}
	for (i = N_BPE; i < N_VOCAB; i++) {
		pieces[i].ptr = specials[i - N_BPE];
		pieces[i].len = strlen(specials[i - N_BPE]);
	}
}

static int
setup(void **state)
{
	struct tokenizer *tok;
	char err[SOTTO_ERR_MAX];

	vocab_init();
	if (tok_new(pieces, N_VOCAB, N_BPE, &sp, langs, 2, &tok, err) != 0) {
		fprintf(stderr, "tok_new: %s\n", err);
		return -1;
	}
	*state = tok;
	return 0;
}

static int
teardown(void **state)
{
	tok_free(*state);
	return 0;
}

static void
test_accessors(void **state)
{
	struct tokenizer *tok = *state;
	size_t len;

	assert_int_equal(tok_n_vocab(tok), N_VOCAB);
	assert_int_equal(tok_n_bpe(tok), N_BPE);
	assert_int_equal(tok_specials(tok)->sot, SOT);
	assert_false(tok_is_timestamp(tok, NO_TIMESTAMPS));
	assert_true(tok_is_timestamp(tok, TS0));
	assert_true(tok_is_timestamp(tok, N_VOCAB - 1));
	assert_false(tok_is_timestamp(tok, N_VOCAB));
	assert_true(tok_timestamp_seconds(tok, TS0 + 3) > 0.0599f);
	assert_true(tok_timestamp_seconds(tok, TS0 + 3) < 0.0601f);
	assert_int_equal(tok_language_index(tok, "en"), 0);
	assert_int_equal(tok_language_index(tok, "de"), 1);
	assert_int_equal(tok_language_index(tok, "e"), -1);
	assert_int_equal(tok_language_index(tok, "fr"), -1);
	assert_int_equal(tok_n_languages(tok), 2);
	assert_string_equal(tok_language_code(tok, 1), "de");
	assert_null(tok_language_code(tok, 2));
	assert_memory_equal(tok_token_bytes(tok, 262, &len), "hell", 4);
	assert_int_equal(len, 4);
	assert_null(tok_token_bytes(tok, N_VOCAB, &len));
	assert_null(tok_token_bytes(tok, -1, &len));
}

static void
test_new_rejects(void **state)
{
	struct tok_specials bad = sp;
	struct tok_piece save;
	struct tokenizer *tok;
	char err[SOTTO_ERR_MAX];

	(void)state;
	/* A duplicate, then a missing byte. */
	save = pieces[200];
	pieces[200] = pieces[201];
	assert_int_equal(tok_new(pieces, N_VOCAB, N_BPE, &sp, langs, 2, &tok,
	    err), SOTTO_EFORMAT);
	assert_null(tok);
	assert_non_null(strstr(err, "duplicate"));
	pieces[200].ptr = "zz";
	pieces[200].len = 2;
	assert_int_equal(tok_new(pieces, N_VOCAB, N_BPE, &sp, langs, 2, &tok,
	    err), SOTTO_EFORMAT);
	assert_non_null(strstr(err, "byte 0xc8"));
	pieces[200] = save;
	/* Specials out of range. */
	bad.eot = N_VOCAB;
	assert_int_equal(tok_new(pieces, N_VOCAB, N_BPE, &bad, langs, 2, &tok,
	    err), SOTTO_EFORMAT);
	bad = sp;
	bad.timestamp_begin = EOT;
	assert_int_equal(tok_new(pieces, N_VOCAB, N_BPE, &bad, langs, 2, &tok,
	    err), SOTTO_EFORMAT);
	/* More languages than tokens after sot. */
	assert_int_equal(tok_new(pieces, N_VOCAB, N_BPE, &sp, langs,
	    N_VOCAB - SOT, &tok, NULL), SOTTO_EFORMAT);
	assert_int_equal(tok_new(pieces, N_VOCAB, 100, &sp, langs, 2, &tok,
	    err), SOTTO_EINVAL);
	assert_null(tok_free(NULL));
}

static void
check_decode(struct tokenizer *tok, const int32_t *ids, int n,
    const char *want)
{
	char err[SOTTO_ERR_MAX], *text;

	assert_int_equal(tok_decode(tok, ids, n, &text, err), 0);
	assert_string_equal(text, want);
	free(text);
}

static void
test_decode_skips_specials(void **state)
{
	struct tokenizer *tok = *state;
	const int32_t ids[] = { SOT, LANG_EN, TRANSCRIBE, TS0, 262, 'o',
	    264, 'o', 'r', 'l', 'd', TS0 + 2, EOT, N_VOCAB + 5 };
	char err[SOTTO_ERR_MAX], *text;
	const int32_t neg[] = { 'a', -1 };

	check_decode(tok, ids, 14, "hello world");
	check_decode(tok, ids, 0, "");
	assert_int_equal(tok_decode(tok, neg, 2, &text, err), SOTTO_EINVAL);
	assert_null(text);
}

/* Bytes to ids, one byte token each. */
static int
byte_ids(const char *s, int32_t *ids)
{
	int n;

	for (n = 0; s[n] != '\0'; n++)
		ids[n] = (unsigned char)s[n];
	return n;
}

static void
test_decode_replacement(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "a\x80" "b", "a\xef\xbf\xbd" "b" },		/* lone cont. */
		{ "\xe2\x82", "\xef\xbf\xbd" },			/* truncated */
		{ "\xe2\x82" "a", "\xef\xbf\xbd" "a" },
		{ "\xf0\x9f\x98", "\xef\xbf\xbd" },
		{ "\xc3", "\xef\xbf\xbd" },
		{ "\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd" },	/* overlong */
		{ "\xe0\x80\xaf", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf4\x90\x80\x80",				/* > 10FFFF */
		    "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xff\xfe", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xf5\x80", "\xef\xbf\xbd\xef\xbf\xbd" },
		{ "\xe2\x82\xe2\x82\xac", "\xef\xbf\xbd\xe2\x82\xac" },
		{ "\xf0\x9f\x98\x80", "\xf0\x9f\x98\x80" },	/* valid */
		{ "\xc3\xa9t\xc3\xa9", "\xc3\xa9t\xc3\xa9" },
	};
	struct tokenizer *tok = *state;
	char err[SOTTO_ERR_MAX], *raw;
	int32_t ids[16];
	size_t i, len;
	int n;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		n = byte_ids(cases[i].in, ids);
		check_decode(tok, ids, n, cases[i].want);
		assert_int_equal(tok_decode_bytes(tok, ids, n, &raw, &len,
		    err), 0);
		assert_int_equal(len, strlen(cases[i].in));
		assert_memory_equal(raw, cases[i].in, len);
		free(raw);
	}
}

static void
test_complete_prefix(void **state)
{
	(void)state;
	assert_int_equal(tok_utf8_complete_prefix("", 0), 0);
	assert_int_equal(tok_utf8_complete_prefix("abc", 3), 3);
	assert_int_equal(tok_utf8_complete_prefix("a\xe2\x82", 3), 1);
	assert_int_equal(tok_utf8_complete_prefix("a\xe2", 2), 1);
	assert_int_equal(tok_utf8_complete_prefix("a\xe2\x82\xac", 4), 4);
	assert_int_equal(tok_utf8_complete_prefix("\xf0\x9f\x98", 3), 0);
	assert_int_equal(tok_utf8_complete_prefix("\xf0\x9f\x98\x80", 4), 4);
	/* Invalid already: nothing to wait for. */
	assert_int_equal(tok_utf8_complete_prefix("a\xed\xa0", 3), 3);
	assert_int_equal(tok_utf8_complete_prefix("a\xe0\x80", 3), 3);
	assert_int_equal(tok_utf8_complete_prefix("a\x80", 2), 2);
	assert_int_equal(tok_utf8_complete_prefix("a\xc0", 2), 2);
	assert_int_equal(tok_utf8_complete_prefix("\x80\x80\x80\x80", 4), 4);
}

/* Split s with tok_pretoken_len and compare with want, "|" separated. */
static void
check_split(const char *s, const char *want)
{
	char got[256];
	size_t len = strlen(s), pos, n, o = 0;

	for (pos = 0; pos < len; pos += n) {
		n = tok_pretoken_len(s + pos, len - pos);
		assert_true(n > 0 && pos + n <= len);
		if (pos > 0)
			got[o++] = '|';
		memcpy(got + o, s + pos, n);
		o += n;
	}
	got[o] = '\0';
	assert_string_equal(got, want);
}

static void
test_pretokenize(void **state)
{
	(void)state;
	check_split("I'm sure they'll", "I|'m| sure| they|'ll");
	check_split("it's we've you're I'd 'tis",
	    "it|'s| we|'ve| you|'re| I|'d| '|tis");
	check_split("'S", "'|S");
	check_split("?!'s", "?!'|s");
	check_split("hello  world", "hello| | world");
	check_split("a\tb", "a|\t|b");
	check_split("end   ", "end|   ");
	check_split("x \n y", "x| \n| y");
	check_split("abc123def", "abc|123|def");
	check_split(" 2024!!", " 2024|!!");
	check_split("  ", "  ");
	check_split(" ", " ");
	check_split("Gr\xc3\xbc\xc3\x9f" "e 12\xc2\xbd",
	    "Gr\xc3\xbc\xc3\x9f" "e| 12\xc2\xbd");
	check_split("\xe4\xb8\xad\xe6\x96\x87 \xe5\xad\x97",
	    "\xe4\xb8\xad\xe6\x96\x87| \xe5\xad\x97");
	check_split("a\xc2\xa0" "b", "a|\xc2\xa0|b");		/* NBSP is \s */
	check_split("e\xcc\x81", "e|\xcc\x81");		/* Mn is not \p{L} */
	check_split("a \xe3\x80\x80" "b", "a| |\xe3\x80\x80|b");
	check_split("a\xff" "b", "a|\xff|b");	/* invalid byte: other */
}

static void
check_encode(struct tokenizer *tok, const char *text, const int32_t *want,
    int n_want)
{
	char err[SOTTO_ERR_MAX];
	int32_t *ids;
	int n;

	assert_int_equal(tok_encode(tok, text, &ids, &n, err), 0);
	assert_int_equal(n, n_want);
	if (n > 0)
		assert_memory_equal(ids, want, (size_t)n * sizeof(*ids));
	free(ids);
}

static void
test_encode(void **state)
{
	struct tokenizer *tok = *state;

	/* "bc" (256) ranks before "ab" (257). */
	check_encode(tok, "abc", (const int32_t[]){ 'a', 256 }, 2);
	check_encode(tok, "xyz", (const int32_t[]){ 258, 'z' }, 2);
	/* he, then ll, then hell. */
	check_encode(tok, "hello", (const int32_t[]){ 262, 'o' }, 2);
	/* "he" (260) beats " h" (265). */
	check_encode(tok, " hello", (const int32_t[]){ ' ', 262, 'o' }, 3);
	check_encode(tok, " world", (const int32_t[]){ 264, 'o', 'r', 'l',
	    'd' }, 5);
	/* Equal pairs merge leftmost first. */
	check_encode(tok, "aaa", (const int32_t[]){ 263, 'a' }, 2);
	/* A whole pre-token that is a token is taken as is. */
	check_encode(tok, "qrs", (const int32_t[]){ 268 }, 1);
	check_encode(tok, "qqq", (const int32_t[]){ 267 }, 1);
	check_encode(tok, "qqqq", (const int32_t[]){ 266, 266 }, 2);
	/* Contractions are their own pre-tokens. */
	check_encode(tok, "it's", (const int32_t[]){ 'i', 't', 269 }, 3);
	check_encode(tok, "ab's", (const int32_t[]){ 257, 269 }, 2);
	/* Special-token text is plain text. */
	check_encode(tok, "<|", (const int32_t[]){ '<', '|' }, 2);
	check_encode(tok, "", NULL, 0);
	check_encode(tok, "\xe2\x82\xac", (const int32_t[]){ 0xe2, 0x82,
	    0xac }, 3);
}

static void
test_round_trip(void **state)
{
	static const char *const texts[] = {
		"hello world, it's  a test\n", " abc xyz qqqq\t",
		"\xc3\xa9t\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 1\xc2\xbd",
	};
	struct tokenizer *tok = *state;
	char err[SOTTO_ERR_MAX], *text;
	int32_t *ids;
	size_t i;
	int n;

	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		assert_int_equal(tok_encode(tok, texts[i], &ids, &n, err), 0);
		assert_int_equal(tok_decode(tok, ids, n, &text, err), 0);
		assert_string_equal(text, texts[i]);
		free(text);
		free(ids);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accessors),
		cmocka_unit_test(test_new_rejects),
		cmocka_unit_test(test_decode_skips_specials),
		cmocka_unit_test(test_decode_replacement),
		cmocka_unit_test(test_complete_prefix),
		cmocka_unit_test(test_pretokenize),
		cmocka_unit_test(test_encode),
		cmocka_unit_test(test_round_trip),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
