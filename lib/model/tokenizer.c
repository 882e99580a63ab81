/*
 * Whisper's tokenizer (ref: whisper/tokenizer.py, tiktoken): the
 * vocabulary, and decoding ids to text. Encoding text to ids is
 * tokenizer-encode.c's.
 *
 * Design. Token ids index an array of borrowed byte strings. The first
 * n_bpe are BPE tokens whose merge rank is their id; an open-addressing
 * hash table (FNV-1a) maps bytes back to ids (tok_lookup). Decoding
 * concatenates token bytes and replaces invalid UTF-8 the way Python's
 * bytes.decode(errors="replace") does.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "tokenizer.h"

#define TOK_LANG_MAX_BYTES	16
#define TOK_TIME_PRECISION	0.02f

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

int32_t
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

size_t
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
