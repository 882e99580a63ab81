/*
 * Test driver for lib/model/tokenizer.c and tokenizer-encode.c, run by
 * test_tokenizer_real.py.
 *
 * usage: tok_driver vocab.txt < commands
 *
 * vocab.txt: a line "sotto-tok 1"; a line "n_vocab n_bpe eot sot translate
 * transcribe sot_lm sot_prev no_speech no_timestamps timestamp_begin
 * n_languages" followed by the language codes; then one line per token id with
 * its bytes in hex ("-" for none).
 *
 * Commands, one per line, each answered by one line:
 *   E <hex>	tok_encode of the bytes: ids separated by spaces
 *   D <ids>	tok_decode: hex of the text
 *   R <ids>	tok_decode_bytes: hex of the raw bytes
 *   P <hex>	tok_utf8_complete_prefix: a length
 *   L <code>	tok_language_index
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sotto.h"
#include "tokenizer.h"

static char *
driver_unhex(const char *h, size_t *ret_len)
{
	size_t n = strlen(h) / 2, i;
	unsigned int b;
	char *p;

	if ((p = malloc(n + 1)) == NULL)
		abort();
	for (i = 0; i < n; i++) {
		if (sscanf(h + 2 * i, "%2x", &b) != 1)
			abort();
		p[i] = (char)b;
	}
	p[n] = '\0';
	*ret_len = n;
	return p;
}

static void
driver_puthex(const char *p, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		printf("%02x", (unsigned char)p[i]);
	putchar('\n');
}

static struct tok_piece *pieces;
static int n_vocab;

static struct tokenizer *
driver_load(const char *path)
{
	struct tok_specials sp;
	struct tok_piece langs[200];
	struct tokenizer *tok;
	char err[SOTTO_ERR_MAX], word[64], *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int n_bpe, n_lang, i;
	FILE *f;

	if ((f = fopen(path, "r")) == NULL ||
	    fscanf(f, "sotto-tok 1 %d %d %d %d %d %d %d %d %d %d %d %d",
	    &n_vocab, &n_bpe, &sp.eot, &sp.sot, &sp.translate, &sp.transcribe,
	    &sp.sot_lm, &sp.sot_prev, &sp.no_speech, &sp.no_timestamps,
	    &sp.timestamp_begin, &n_lang) != 12 || n_lang > 200)
		abort();
	for (i = 0; i < n_lang; i++) {
		if (fscanf(f, "%63s", word) != 1)
			abort();
		langs[i].ptr = strdup(word);
		langs[i].len = strlen(word);
	}
	if ((n = getline(&line, &cap, f)) < 0)
		abort();
	if ((pieces = calloc((size_t)n_vocab, sizeof(*pieces))) == NULL)
		abort();
	for (i = 0; i < n_vocab; i++) {
		if ((n = getline(&line, &cap, f)) <= 0)
			abort();
		line[strcspn(line, "\n")] = '\0';
		if (strcmp(line, "-") != 0)
			pieces[i].ptr = driver_unhex(line, &pieces[i].len);
	}
	fclose(f);
	free(line);
	if (tok_new(pieces, n_vocab, n_bpe, &sp, langs, n_lang, &tok,
	    err) != 0) {
		fprintf(stderr, "tok_new: %s\n", err);
		exit(1);
	}
	/* The tokenizer copied the langs; it borrows the piece bytes. */
	for (i = 0; i < n_lang; i++)
		free((char *)langs[i].ptr);
	return tok;
}

static int32_t *
driver_ids(const char *s, int *ret_n)
{
	int32_t *ids;
	int n = 0;
	char *end;

	if ((ids = malloc((strlen(s) + 1) * sizeof(*ids))) == NULL)
		abort();
	for (;;) {
		long v = strtol(s, &end, 10);

		if (end == s)
			break;
		ids[n++] = (int32_t)v;
		s = end;
	}
	*ret_n = n;
	return ids;
}

static void
driver_command(struct tokenizer *tok, char *line)
{
	char err[SOTTO_ERR_MAX], *text, *arg = line + 2;
	int32_t *ids;
	size_t len;
	int n, i;

	switch (line[0]) {
	case 'E':
		text = driver_unhex(arg, &len);
		if (tok_encode(tok, text, &ids, &n, err) != 0)
			printf("error %s\n", err);
		else {
			for (i = 0; i < n; i++)
				printf(i ? " %d" : "%d", (int)ids[i]);
			putchar('\n');
			free(ids);
		}
		free(text);
		break;
	case 'D':
	case 'R':
		ids = driver_ids(arg, &n);
		if (line[0] == 'D') {
			i = tok_decode(tok, ids, n, &text, err);
			len = i == 0 ? strlen(text) : 0;
		} else
			i = tok_decode_bytes(tok, ids, n, &text, &len, err);
		if (i != 0)
			printf("error %s\n", err);
		else {
			driver_puthex(text, len);
			free(text);
		}
		free(ids);
		break;
	case 'P':
		text = driver_unhex(arg, &len);
		printf("%zu\n", tok_utf8_complete_prefix(text, len));
		free(text);
		break;
	case 'L':
		printf("%d\n", tok_language_index(tok, arg));
		break;
	default:
		printf("error unknown command\n");
		break;
	}
}

int
main(int argc, char *argv[])
{
	struct tokenizer *tok;
	char *line = NULL;
	size_t cap = 0;
	int n;

	if (argc != 2) {
		fprintf(stderr, "usage: tok_driver vocab.txt\n");
		return 2;
	}
	tok = driver_load(argv[1]);
	while (getline(&line, &cap, stdin) > 0) {
		line[strcspn(line, "\n")] = '\0';
		if (strlen(line) < 2)
			line[1] = '\0';
		driver_command(tok, line);
		fflush(stdout);
	}
	free(line);
	tok_free(tok);
	for (n = 0; n < n_vocab; n++)
		free((char *)pieces[n].ptr);
	free(pieces);
	return 0;
}
