/*
 * Whisper's tokenizer: token bytes, byte-level BPE, special ids, id -> text.
 *
 * ref: whisper/tokenizer.py get_encoding() on top of tiktoken. The
 * tokenizer is built from plain arrays so that it does not depend on the
 * GGUF reader: the model passes the bytes of every token (borrowed; they
 * live in the mmap'd file, which must outlive the tokenizer), the number
 * of BPE tokens (whose merge rank is their id), the special ids and the
 * language codes.
 */
#ifndef SOTTO_TOKENIZER_H
#define SOTTO_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

struct tok_specials {
	int32_t eot;		/* <|endoftext|>; every id >= eot is not text */
	int32_t sot;		/* <|startoftranscript|>; language i: sot+1+i */
	int32_t translate;
	int32_t transcribe;
	int32_t sot_lm;
	int32_t sot_prev;
	int32_t no_speech;
	int32_t no_timestamps;
	int32_t timestamp_begin; /* <|0.00|>; all ids from here are times */
};

/* Borrowed bytes, not NUL-terminated. */
struct tok_piece {
	const char *ptr;
	size_t len;
};

/*
 * Owns a copy of the piece array and a hash index of the BPE pieces and
 * copies of the language codes; borrows the piece bytes.
 */
struct tokenizer;

/*
 * Build a tokenizer over pieces[n_vocab] whose first n_bpe entries are the
 * BPE tokens (n_bpe <= eot, all 256 single bytes among them, no
 * duplicates) and languages[n_languages] (codes such as "en").
 */
int		 tok_new(const struct tok_piece *pieces, int n_vocab, int n_bpe,
		    const struct tok_specials *sp,
		    const struct tok_piece *languages, int n_languages,
		    struct tokenizer **ret, char *err);
/* Accepts NULL; returns NULL. */
struct tokenizer *tok_free(struct tokenizer *);

const struct tok_specials *tok_specials(const struct tokenizer *);
int		 tok_n_vocab(const struct tokenizer *);
int		 tok_n_bpe(const struct tokenizer *);
int		 tok_is_timestamp(const struct tokenizer *, int32_t id);
/* Seconds of a timestamp token: (id - timestamp_begin) * 0.02. */
float		 tok_timestamp_seconds(const struct tokenizer *, int32_t id);

/* Bytes of one token (specials as their text), or NULL if out of range. */
const char	*tok_token_bytes(const struct tokenizer *, int32_t id,
		    size_t *ret_len);

/*
 * Text of ids[n], skipping every id >= eot (specials and timestamps), as
 * tiktoken decode() + bytes.decode("utf-8", errors="replace"): every
 * maximal invalid subpart becomes U+FFFD as in Python. *ret is malloc'd
 * and NUL-terminated (a token of byte 0 ends the string early); the
 * caller frees it. Negative ids are an error.
 */
int		 tok_decode(const struct tokenizer *, const int32_t *ids, int n,
		    char **ret, char *err);
/*
 * Raw bytes of the text tokens of ids[n], without replacement (streaming
 * callers hold back an incomplete UTF-8 tail, see below). *ret is
 * malloc'd, NUL-terminated (it may hold NULs); its length is *ret_len.
 */
int		 tok_decode_bytes(const struct tokenizer *, const int32_t *ids,
		    int n, char **ret, size_t *ret_len, char *err);
/*
 * Length of s[len] without a trailing sequence that is valid so far but
 * incomplete (e.g. "\xe2\x82"); len if there is none.
 */
size_t		 tok_utf8_complete_prefix(const char *s, size_t len);
/*
 * Length of the well-formed prefix of the UTF-8 sequence at s[0..len)
 * (at most 1 + need); *ret_need gets need, the continuation bytes its
 * lead byte asks for, or -1 for a byte that cannot start one.
 */
size_t		 tok_utf8_valid(const unsigned char *s, size_t len,
		    int *ret_need);

/* The BPE token whose bytes are p[len], or -1. */
int32_t		 tok_lookup(const struct tokenizer *, const char *p, size_t len);

/*
 * tokenizer-encode.c: BPE-encode UTF-8 text as tiktoken encode_ordinary() with the GPT-2
 * pattern (special-token text is encoded as plain text). *ret is
 * malloc'd (the caller frees it), *ret_n tokens long.
 */
int		 tok_encode(const struct tokenizer *, const char *text,
		    int32_t **ret, int *ret_n, char *err);
/*
 * Length of the first GPT-2 pre-token of s[len] (0 only when len is 0).
 * Exposed for the unit tests.
 */
size_t		 tok_pretoken_len(const char *s, size_t len);

/* Index of a language code ("en"), or -1 if the model does not have it. */
int		 tok_language_index(const struct tokenizer *, const char *code);
/* NUL-terminated code of language index i, or NULL when out of range. */
const char	*tok_language_code(const struct tokenizer *, int i);
int		 tok_n_languages(const struct tokenizer *);

#endif
