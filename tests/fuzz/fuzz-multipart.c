/*
 * libFuzzer target for daemon/http/multipart.c. The input's first line is a
 * Content-Type header value, the rest a request body: the boundary is
 * taken from the header (or, when the header has none, "b") and the body
 * split. ASan checks every read stays inside the input; every accepted
 * part must lie inside the body, after the one before, with bounded
 * NUL-terminated fields. Parts whose fields have no control characters
 * are written back as a body, which must split into the same parts.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "multipart.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_PARTS	8

static void
fuzz_check_str(const char *s, size_t cap)
{
	if (memchr(s, '\0', cap) == NULL)
		abort();
}

static int
fuzz_plain(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return 0;
	return 1;
}

/* "name" as a quoted string, with \" and \\ escaped. */
static void
fuzz_quote(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s != '\0'; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

/* Write parts[n] back as a body; they must come back the same. */
static void
fuzz_round_trip(const struct multipart_part *parts, int n, const char *b)
{
	struct multipart_part again[FUZZ_PARTS];
	char *body = NULL, msg[256];
	size_t len = 0;
	FILE *f;
	int i, m;

	for (i = 0; i < n; i++)
		if (!fuzz_plain(parts[i].name) ||
		    !fuzz_plain(parts[i].filename) ||
		    !fuzz_plain(parts[i].content_type))
			return;
	if ((f = open_memstream(&body, &len)) == NULL)
		return;
	for (i = 0; i < n; i++) {
		fprintf(f, "--%s\r\nContent-Disposition: form-data; name=", b);
		fuzz_quote(f, parts[i].name);
		if (parts[i].has_filename) {
			fprintf(f, "; filename=");
			fuzz_quote(f, parts[i].filename);
		}
		fprintf(f, "\r\n");
		if (parts[i].content_type[0] != '\0')
			fprintf(f, "Content-Type: %s\r\n",
			    parts[i].content_type);
		fprintf(f, "\r\n");
		fwrite(parts[i].data, 1, parts[i].len, f);
		fprintf(f, "\r\n");
	}
	fprintf(f, "--%s--\r\n", b);
	fclose(f);
	m = multipart_parse((const uint8_t *)body, len, b, again, FUZZ_PARTS,
	    msg, sizeof(msg));
	if (m != n)
		abort();
	for (i = 0; i < n; i++)
		if (strcmp(again[i].name, parts[i].name) != 0 ||
		    strcmp(again[i].filename, parts[i].filename) != 0 ||
		    again[i].has_filename != parts[i].has_filename ||
		    again[i].len != parts[i].len ||
		    memcmp(again[i].data, parts[i].data, parts[i].len) != 0)
			abort();
	free(body);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct multipart_part parts[FUZZ_PARTS];
	char boundary[MULTIPART_BOUNDARY_MAX], msg[256], *ct;
	const uint8_t *nl, *body, *prev;
	size_t ctlen, len;
	int n, i;

	nl = memchr(data, '\n', size);
	ctlen = nl != NULL ? (size_t)(nl - data) : size;
	if ((ct = malloc(ctlen + 1)) == NULL)
		return 0;
	memcpy(ct, data, ctlen);
	ct[ctlen] = '\0';
	if (multipart_boundary(ct, boundary, msg, sizeof(msg)) != 0)
		snprintf(boundary, sizeof(boundary), "b");
	fuzz_check_str(boundary, sizeof(boundary));
	fuzz_check_str(msg, sizeof(msg));
	free(ct);
	body = nl != NULL ? nl + 1 : data + size;
	len = (size_t)(data + size - body);
	n = multipart_parse(body, len, boundary, parts, FUZZ_PARTS, msg,
	    sizeof(msg));
	fuzz_check_str(msg, sizeof(msg));
	if (n < -1 || n == 0 || n > FUZZ_PARTS)
		abort();
	for (i = 0, prev = body; i < n; i++) {
		fuzz_check_str(parts[i].name, sizeof(parts[i].name));
		fuzz_check_str(parts[i].filename, sizeof(parts[i].filename));
		fuzz_check_str(parts[i].content_type,
		    sizeof(parts[i].content_type));
		if (parts[i].name[0] == '\0' || parts[i].data < prev ||
		    parts[i].len > (size_t)(body + len - parts[i].data))
			abort();
		prev = parts[i].data + parts[i].len;
	}
	if (n > 0)
		fuzz_round_trip(parts, n, boundary);
	return 0;
}
