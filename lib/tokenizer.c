/*
 * Whisper's tokenizer (ref: whisper/tokenizer.py, tiktoken).
 *
 * Design. Token ids index an array of borrowed byte strings. The first
 * n_bpe are BPE tokens whose merge rank is their id; an open-addressing
 * hash table (FNV-1a) maps bytes back to ids. Encoding splits UTF-8 text
 * with a hand-written matcher equivalent to the GPT-2 pattern
 *
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *
 * (whisper/tokenizer.py get_encoding), classifying codepoints with the
 * generated run table in tokenizer-ucd.h, then merges each pre-token
 * tiktoken's way: whole pre-tokens that are tokens map directly, otherwise
 * from single bytes, repeatedly merge the leftmost adjacent pair of lowest
 * rank. Decoding concatenates token bytes and replaces invalid UTF-8 the
 * way Python's bytes.decode(errors="replace") does.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tokenizer.h"
#include "tokenizer-ucd.h"

#define TOK_LANG_MAX_BYTES	16
#define TOK_TIME_PRECISION	0.02f

enum tok_class {
	TOK_OTHER = 0,
	TOK_LETTER = 1,
	TOK_NUMBER = 2,
	TOK_SPACE = 3,
};

struct tokenizer {
	struct tok_piece *pieces;	/* [n_vocab] owned; bytes borrowed */
	int n_vocab;
	int n_bpe;
	struct tok_specials sp;
	int32_t *slots;			/* [mask + 1] BPE id + 1; 0 = empty */
	uint32_t mask;
	char (*langs)[TOK_LANG_MAX_BYTES]; /* [n_languages] owned */
	int n_languages;
};

static uint32_t
tok_hash(const char *p, size_t len)
{
	uint32_t h = 2166136261u;
	size_t i;

	for (i = 0; i < len; i++) {
		h ^= (unsigned char)p[i];
		h *= 16777619u;
	}
	return h;
}

/* BPE id of the bytes p[len], or -1. */
static int32_t
tok_lookup(const struct tokenizer *tok, const char *p, size_t len)
{
	const struct tok_piece *pc;
	uint32_t i;
	int32_t v;

	for (i = tok_hash(p, len) & tok->mask;; i = (i + 1) & tok->mask) {
		if ((v = tok->slots[i]) == 0)
			return -1;
		pc = &tok->pieces[v - 1];
		if (pc->len == len && memcmp(pc->ptr, p, len) == 0)
			return v - 1;
	}
}

static int
tok_index(struct tokenizer *tok, char *err)
{
	const struct tok_piece *pc;
	uint32_t size, i;
	int32_t id;

	for (size = 64; size < 2u * (uint32_t)tok->n_bpe; size *= 2)
		;
	if ((tok->slots = calloc(size, sizeof(*tok->slots))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "tokenizer: out of memory");
	tok->mask = size - 1;
	for (id = 0; id < tok->n_bpe; id++) {
		pc = &tok->pieces[id];
		/* multilingual.tiktoken has an empty one: never a merge. */
		if (pc->len == 0)
			continue;
		if (tok_lookup(tok, pc->ptr, pc->len) != -1)
			return err_set(err, SOTTO_EFORMAT,
			    "tokenizer: BPE token %d is a duplicate", (int)id);
		i = tok_hash(pc->ptr, pc->len) & tok->mask;
		while (tok->slots[i] != 0)
			i = (i + 1) & tok->mask;
		tok->slots[i] = id + 1;
	}
	for (i = 0; i < 256; i++) {
		char b = (char)i;

		if (tok_lookup(tok, &b, 1) == -1)
			return err_set(err, SOTTO_EFORMAT,
			    "tokenizer: no token for byte 0x%02x", i);
	}
	return 0;
}

static int
tok_check_specials(const struct tok_specials *sp, int n_vocab, int n_bpe,
    int n_languages, char *err)
{
	const int32_t ids[] = { sp->eot, sp->sot, sp->translate,
	    sp->transcribe, sp->sot_lm, sp->sot_prev, sp->no_speech,
	    sp->no_timestamps };
	size_t i;

	for (i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
		if (ids[i] < n_bpe || ids[i] >= n_vocab)
			return err_set(err, SOTTO_EFORMAT, "tokenizer: special "
			    "token id %d outside %d..%d", (int)ids[i], n_bpe,
			    n_vocab - 1);
	if (sp->timestamp_begin <= sp->eot || sp->timestamp_begin > n_vocab)
		return err_set(err, SOTTO_EFORMAT, "tokenizer: bad "
		    "timestamp_begin %d", (int)sp->timestamp_begin);
	if ((int64_t)sp->sot + n_languages >= n_vocab)
		return err_set(err, SOTTO_EFORMAT, "tokenizer: %d languages "
		    "after sot %d exceed the vocabulary", n_languages,
		    (int)sp->sot);
	return 0;
}

static int
tok_copy_languages(struct tokenizer *tok, const struct tok_piece *languages,
    int n_languages, char *err)
{
	int i;

	if (n_languages == 0)
		return 0;
	tok->langs = calloc((size_t)n_languages, sizeof(*tok->langs));
	if (tok->langs == NULL)
		return err_set(err, SOTTO_ENOMEM, "tokenizer: out of memory");
	for (i = 0; i < n_languages; i++) {
		if (languages[i].len == 0 ||
		    languages[i].len >= TOK_LANG_MAX_BYTES ||
		    memchr(languages[i].ptr, '\0', languages[i].len) != NULL)
			return err_set(err, SOTTO_EFORMAT,
			    "tokenizer: bad language code %d", i);
		memcpy(tok->langs[i], languages[i].ptr, languages[i].len);
	}
	tok->n_languages = n_languages;
	return 0;
}

int
tok_new(const struct tok_piece *pieces, int n_vocab, int n_bpe,
    const struct tok_specials *sp, const struct tok_piece *languages,
    int n_languages, struct tokenizer **ret, char *err)
{
	struct tokenizer *tok;
	int i, rc;

	*ret = NULL;
	if (pieces == NULL || sp == NULL || n_vocab <= 0 || n_bpe < 256 ||
	    n_bpe > n_vocab || n_languages < 0 ||
	    (n_languages > 0 && languages == NULL))
		return err_set(err, SOTTO_EINVAL, "tokenizer: bad vocabulary "
		    "size (n_vocab %d, n_bpe %d)", n_vocab, n_bpe);
	if ((rc = tok_check_specials(sp, n_vocab, n_bpe, n_languages,
	    err)) != 0)
		return rc;
	for (i = 0; i < n_vocab; i++)
		if (pieces[i].ptr == NULL && pieces[i].len != 0)
			return err_set(err, SOTTO_EINVAL,
			    "tokenizer: token %d has no bytes", i);
	if ((tok = calloc(1, sizeof(*tok))) == NULL ||
	    (tok->pieces = malloc((size_t)n_vocab * sizeof(*pieces))) == NULL) {
		tok_free(tok);
		return err_set(err, SOTTO_ENOMEM, "tokenizer: out of memory");
	}
	memcpy(tok->pieces, pieces, (size_t)n_vocab * sizeof(*pieces));
	tok->n_vocab = n_vocab;
	tok->n_bpe = n_bpe;
	tok->sp = *sp;
	if ((rc = tok_index(tok, err)) != 0 ||
	    (rc = tok_copy_languages(tok, languages, n_languages, err)) != 0) {
		tok_free(tok);
		return rc;
	}
	*ret = tok;
	return 0;
}

struct tokenizer *
tok_free(struct tokenizer *tok)
{
	if (tok != NULL) {
		free(tok->pieces);
		free(tok->slots);
		free(tok->langs);
		free(tok);
	}
	return NULL;
}

const struct tok_specials *
tok_specials(const struct tokenizer *tok)
{
	return &tok->sp;
}

int
tok_n_vocab(const struct tokenizer *tok)
{
	return tok->n_vocab;
}

int
tok_n_bpe(const struct tokenizer *tok)
{
	return tok->n_bpe;
}

int
tok_is_timestamp(const struct tokenizer *tok, int32_t id)
{
	return id >= tok->sp.timestamp_begin && id < tok->n_vocab;
}

float
tok_timestamp_seconds(const struct tokenizer *tok, int32_t id)
{
	return (float)(id - tok->sp.timestamp_begin) * TOK_TIME_PRECISION;
}

const char *
tok_token_bytes(const struct tokenizer *tok, int32_t id, size_t *ret_len)
{
	if (id < 0 || id >= tok->n_vocab)
		return NULL;
	*ret_len = tok->pieces[id].len;
	return tok->pieces[id].ptr != NULL ? tok->pieces[id].ptr : "";
}

int
tok_language_index(const struct tokenizer *tok, const char *code)
{
	int i;

	for (i = 0; code != NULL && i < tok->n_languages; i++)
		if (strcmp(tok->langs[i], code) == 0)
			return i;
	return -1;
}

const char *
tok_language_code(const struct tokenizer *tok, int i)
{
	if (i < 0 || i >= tok->n_languages)
		return NULL;
	return tok->langs[i];
}

int
tok_n_languages(const struct tokenizer *tok)
{
	return tok->n_languages;
}

/* Decoding. */

int
tok_decode_bytes(const struct tokenizer *tok, const int32_t *ids, int n,
    char **ret, size_t *ret_len, char *err)
{
	size_t len = 0;
	char *buf;
	int i;

	*ret = NULL;
	*ret_len = 0;
	for (i = 0; i < n; i++) {
		if (ids[i] < 0)
			return err_set(err, SOTTO_EINVAL,
			    "tokenizer: negative token id %d", (int)ids[i]);
		if (ids[i] < tok->sp.eot)
			len += tok->pieces[ids[i]].len;
	}
	if ((buf = malloc(len + 1)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "tokenizer: out of memory");
	len = 0;
	for (i = 0; i < n; i++) {
		if (ids[i] < tok->sp.eot && tok->pieces[ids[i]].len > 0) {
			memcpy(buf + len, tok->pieces[ids[i]].ptr,
			    tok->pieces[ids[i]].len);
			len += tok->pieces[ids[i]].len;
		}
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

/*
 * Well-formed UTF-8 (Unicode table 3-7): the number of continuation bytes
 * a lead byte needs, 0 for ASCII, -1 if it cannot start a sequence; and
 * the range allowed for the first continuation byte.
 */
static int
tok_utf8_lead(unsigned char b, unsigned char *lo, unsigned char *hi)
{
	*lo = 0x80;
	*hi = 0xbf;
	if (b < 0x80)
		return 0;
	if (b < 0xc2 || b > 0xf4)
		return -1;
	if (b < 0xe0)
		return 1;
	if (b == 0xe0)
		*lo = 0xa0;
	else if (b == 0xed)
		*hi = 0x9f;
	else if (b == 0xf0)
		*lo = 0x90;
	else if (b == 0xf4)
		*hi = 0x8f;
	return b < 0xf0 ? 2 : 3;
}

/*
 * Length of the well-formed prefix of the sequence at s[0..len) (at most
 * 1 + need); *ret_need gets need, or -1 for a byte that cannot start one.
 */
static size_t
tok_utf8_valid(const unsigned char *s, size_t len, int *ret_need)
{
	unsigned char lo, hi;
	size_t k;
	int need;

	*ret_need = need = tok_utf8_lead(s[0], &lo, &hi);
	for (k = 1; need > 0 && k <= (size_t)need && k < len; k++) {
		if (s[k] < lo || s[k] > hi)
			break;
		lo = 0x80;
		hi = 0xbf;
	}
	return k;
}

size_t
tok_utf8_complete_prefix(const char *s, size_t len)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t p, k;
	int need;

	for (p = len; p > 0 && len - p < 4; p--) {
		if ((u[p - 1] & 0xc0) == 0x80)
			continue;
		k = tok_utf8_valid(u + p - 1, len - p + 1, &need);
		if (need > 0 && k == len - p + 1 && k < (size_t)need + 1)
			return p - 1;
		break;
	}
	return len;
}

int
tok_decode(const struct tokenizer *tok, const int32_t *ids, int n,
    char **ret, char *err)
{
	static const char repl[3] = { '\xef', '\xbf', '\xbd' };
	const unsigned char *u;
	char *raw, *out;
	size_t len, i, o, k;
	int need, rc;

	*ret = NULL;
	if ((rc = tok_decode_bytes(tok, ids, n, &raw, &len, err)) != 0)
		return rc;
	if ((out = malloc(3 * len + 1)) == NULL) {
		free(raw);
		return err_set(err, SOTTO_ENOMEM, "tokenizer: out of memory");
	}
	u = (const unsigned char *)raw;
	for (i = o = 0; i < len; i += k) {
		k = tok_utf8_valid(u + i, len - i, &need);
		if (need >= 0 && k == (size_t)need + 1) {
			memcpy(out + o, raw + i, k);
			o += k;
		} else {
			/* A maximal invalid subpart: one U+FFFD. */
			memcpy(out + o, repl, sizeof(repl));
			o += sizeof(repl);
		}
	}
	out[o] = '\0';
	free(raw);
	*ret = out;
	return 0;
}

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
