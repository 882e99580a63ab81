/*
 * Encoding text to token ids, as tiktoken's encode_ordinary() (ref:
 * whisper/tokenizer.py, tiktoken). UTF-8 text is split with a
 * hand-written matcher equivalent to the GPT-2 pattern
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * (whisper/tokenizer.py get_encoding), classifying codepoints with the
 * generated run table in tokenizer-ucd.h, then each pre-token is merged
 * tiktoken's way: whole pre-tokens that are tokens map directly, otherwise
 * from single bytes, repeatedly merge the leftmost adjacent pair of lowest
 * rank.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tokenizer.h"
#include "tokenizer-ucd.h"

enum tok_class {
	TOK_OTHER = 0,
	TOK_LETTER = 1,
	TOK_NUMBER = 2,
	TOK_SPACE = 3,
};

/* Encoding: the GPT-2 pre-tokenizer. */

static enum tok_class
tok_class_of(uint32_t cp)
{
	size_t lo = 0, hi = sizeof(tok_ucd_runs) / sizeof(tok_ucd_runs[0]);
	size_t mid;

	if (cp < 0x80) {
		if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
			return TOK_LETTER;
		if (cp >= '0' && cp <= '9')
			return TOK_NUMBER;
		if (cp == ' ' || (cp >= '\t' && cp <= '\r'))
			return TOK_SPACE;
		return TOK_OTHER;
	}
	/* The last run that starts at or before cp. */
	while (hi - lo > 1) {
		mid = lo + (hi - lo) / 2;
		if ((tok_ucd_runs[mid] >> 2) <= cp)
			lo = mid;
		else
			hi = mid;
	}
	return (enum tok_class)(tok_ucd_runs[lo] & 3);
}

/*
 * Class and byte length of the codepoint at s[pos]; a byte that is not
 * well-formed UTF-8 counts as one "other" character.
 */
static size_t
tok_next(const char *s, size_t len, size_t pos, enum tok_class *ret_class)
{
	const unsigned char *u = (const unsigned char *)s + pos;
	uint32_t cp;
	size_t k, i;
	int need;

	k = tok_utf8_valid(u, len - pos, &need);
	if (need < 0 || k != (size_t)need + 1) {
		*ret_class = TOK_OTHER;
		return 1;
	}
	cp = need == 0 ? u[0] : u[0] & (0x7f >> (need + 1));
	for (i = 1; i < k; i++)
		cp = cp << 6 | (u[i] & 0x3f);
	*ret_class = tok_class_of(cp);
	return k;
}

/* End of the run of characters of class c starting at pos. */
static size_t
tok_run(const char *s, size_t len, size_t pos, enum tok_class c,
    size_t *ret_last)
{
	enum tok_class k;
	size_t n;

	*ret_last = pos;
	while (pos < len) {
		n = tok_next(s, len, pos, &k);
		if (k != c)
			break;
		*ret_last = pos;
		pos += n;
	}
	return pos;
}

static size_t
tok_contraction(const char *s, size_t len)
{
	static const char *const suffixes[] = {
	    "s", "t", "re", "ve", "m", "ll", "d"
	};
	size_t i, n;

	if (s[0] != '\'')
		return 0;
	for (i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
		n = strlen(suffixes[i]);
		if (len >= 1 + n && memcmp(s + 1, suffixes[i], n) == 0)
			return 1 + n;
	}
	return 0;
}

size_t
tok_pretoken_len(const char *s, size_t len)
{
	enum tok_class c, c1;
	size_t n, end, last;

	if (len == 0)
		return 0;
	if ((n = tok_contraction(s, len)) != 0)
		return n;
	/* " ?\p{L}+", " ?\p{N}+", " ?[^\s\p{L}\p{N}]+" */
	if (s[0] == ' ' && len > 1) {
		tok_next(s, len, 1, &c1);
		if (c1 != TOK_SPACE)
			return tok_run(s, len, 1, c1, &last);
	}
	tok_next(s, len, 0, &c);
	if (c != TOK_SPACE)
		return tok_run(s, len, 0, c, &last);
	/*
	 * "\s+(?!\S)": the whole run at the end of the text, else the run
	 * less its last character; "\s+" for a lone one.
	 */
	end = tok_run(s, len, 0, TOK_SPACE, &last);
	return end < len && last > 0 ? last : end;
}

/* Encoding: byte-pair merges. */

/* Rank of the bytes p[len] as one token, INT32_MAX if none. */
static int32_t
tok_rank(const struct tokenizer *tok, const char *p, size_t len)
{
	int32_t id = tok_lookup(tok, p, len);

	return id < 0 ? INT32_MAX : id;
}

/*
 * Merge the pre-token s[len] into out; bound[] and rank[] are scratch of
 * len + 1 entries. Returns the number of tokens written.
 */
static int
tok_bpe(const struct tokenizer *tok, const char *s, size_t len,
    size_t *bound, int32_t *rank, int32_t *out)
{
	size_t m, i, best;
	int32_t id, min;

	if ((id = tok_lookup(tok, s, len)) >= 0) {
		out[0] = id;
		return 1;
	}
	/* Parts are s[bound[i]..bound[i+1]); rank[i] joins parts i, i+1. */
	for (i = 0; i <= len; i++)
		bound[i] = i;
	m = len;
	for (i = 0; i + 1 < m; i++)
		rank[i] = tok_rank(tok, s + i, 2);
	while (m > 1) {
		min = INT32_MAX;
		best = 0;
		for (i = 0; i + 1 < m; i++) {
			if (rank[i] < min) {
				min = rank[i];
				best = i;
			}
		}
		if (min == INT32_MAX)
			break;
		memmove(bound + best + 1, bound + best + 2,
		    (m - best - 1) * sizeof(*bound));
		memmove(rank + best, rank + best + 1,
		    (m - best - 2) * sizeof(*rank));
		m--;
		if (best + 1 < m)
			rank[best] = tok_rank(tok, s + bound[best],
			    bound[best + 2] - bound[best]);
		if (best > 0)
			rank[best - 1] = tok_rank(tok, s + bound[best - 1],
			    bound[best + 1] - bound[best - 1]);
	}
	for (i = 0; i < m; i++)
		out[i] = tok_lookup(tok, s + bound[i], bound[i + 1] - bound[i]);
	return (int)m;
}

int
tok_encode(const struct tokenizer *tok, const char *text, int32_t **ret,
    int *ret_n, char *err)
{
	size_t len, pos, n, *bound;
	int32_t *out, *rank;
	int count = 0;

	*ret = NULL;
	*ret_n = 0;
	len = strlen(text);
	if (len > INT_MAX / 2)
		return err_set(err, SOTTO_EINVAL, "tokenizer: text too long");
	out = malloc((len + 1) * sizeof(*out));
	rank = malloc((len + 1) * sizeof(*rank));
	bound = malloc((len + 1) * sizeof(*bound));
	if (out == NULL || rank == NULL || bound == NULL) {
		free(out);
		free(rank);
		free(bound);
		return err_set(err, SOTTO_ENOMEM, "tokenizer: out of memory");
	}
	for (pos = 0; pos < len; pos += n) {
		n = tok_pretoken_len(text + pos, len - pos);
		count += tok_bpe(tok, text + pos, n, bound, rank, out + count);
	}
	free(rank);
	free(bound);
	*ret = out;
	*ret_n = count;
	return 0;
}
