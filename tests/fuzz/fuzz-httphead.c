/*
 * libFuzzer target for daemon/net/httpd-head.c: what the HTTP listener
 * reads of a request before evhttp does (the end of the header block,
 * the body's length, the token, Expect, framing that two parsers could
 * read two ways).
 *
 * The input is a connection's bytes. The first byte sets how they
 * arrive (pieces of 1 to 16 bytes, or all at once); each header block
 * is found as httpd-conn.c finds it, piece by piece, and must end where
 * one look at all of it says; then it is checked (with a token, a body
 * limit and open paths), the body it announces skipped, and the next
 * request read, as on a kept-alive connection. ASan checks that every
 * read stays inside the input. Every verdict must be one the listener
 * knows how to send, its message printable ASCII (it goes into JSON as
 * it is), the same when checked again; a body that is let through
 * without the token is one the token's owner may send; the token is
 * carried exactly by "Bearer TOKEN".
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "httpd-head.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_TOKEN	"sotto-fuzz-token-0123"
#define FUZZ_REQUESTS	8

static const char *const fuzz_open[] = { "/", "/health", NULL };

static void
fuzz_check_msg(const struct httpd_head *h)
{
	size_t i, n = strnlen(h->msg, sizeof(h->msg));

	if (n == sizeof(h->msg))
		abort();
	for (i = 0; i < n; i++)
		if (h->msg[i] < 0x20 || h->msg[i] >= 0x7f)
			abort();
	if (h->status == 0 ? h->code != NULL || n != 0 :
	    h->code == NULL || n == 0)
		abort();
}

/* The block of buf[len) found piece by piece; must match one look. */
static size_t
fuzz_end(const char *buf, size_t len, unsigned piece)
{
	size_t seen = 0, prev, end = 0, once = httpd_head_end(buf, len, 0);

	while (seen < len && end == 0) {
		prev = seen;
		seen += piece == 0 ? len : piece;
		if (seen > len)
			seen = len;
		end = httpd_head_end(buf, seen, prev);
	}
	if (end != once || end > len)
		abort();
	return end;
}

/* The same block with the token: a body it allows is never a 401. */
static void
fuzz_with_token(const char *buf, size_t end, const struct httpd_head *h,
    const struct httpd_head_rules *r)
{
	static const char auth[] = "Authorization: Bearer " FUZZ_TOKEN "\r\n";
	struct httpd_head again;
	const char *eol = memchr(buf, '\n', end);
	size_t first, n;
	char *b;

	if (h->status != 401 || eol == NULL)
		return;
	/* only when no other Authorization comes first */
	for (n = 0; n + 14 <= end; n++)
		if (strncasecmp(buf + n, "authorization:", 14) == 0)
			return;
	first = (size_t)(eol - buf) + 1;
	if ((b = malloc(end + sizeof(auth))) == NULL)
		return;
	memcpy(b, buf, first);
	memcpy(b + first, auth, sizeof(auth) - 1);
	memcpy(b + first + sizeof(auth) - 1, buf + first, end - first);
	if (httpd_head_check(b, end + sizeof(auth) - 1, r, &again) == 401)
		abort();
	free(b);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct httpd_head_rules rules = {
		.token = FUZZ_TOKEN,
		.max_body = 65536,
		.open = fuzz_open,
	};
	struct httpd_head h, again;
	const char *buf;
	size_t at, end;
	unsigned piece;
	int i;

	if (!httpd_head_bearer("Bearer " FUZZ_TOKEN, 28, FUZZ_TOKEN) ||
	    !httpd_head_bearer(" bearer\t" FUZZ_TOKEN " ", 30, FUZZ_TOKEN) ||
	    httpd_head_bearer("Bearer " FUZZ_TOKEN "x", 29, FUZZ_TOKEN) ||
	    httpd_head_bearer("Bearer", 6, FUZZ_TOKEN) ||
	    httpd_head_bearer("Bearer x", 8, ""))
		abort();
	if (size == 0)
		return 0;
	piece = data[0] % 17;
	buf = (const char *)data + 1;
	size--;
	for (i = 0, at = 0; i < FUZZ_REQUESTS && at < size; i++) {
		if ((end = fuzz_end(buf + at, size - at, piece)) == 0)
			break;
		httpd_head_check(buf + at, end, &rules, &h);
		fuzz_check_msg(&h);
		if (h.len != end || (h.status != 0 && h.status != 400 &&
		    h.status != 401 && h.status != 413) ||
		    (h.body == HTTPD_BODY_LENGTH) != (h.length > 0) ||
		    (h.status == 413 && h.length <= rules.max_body))
			abort();
		if (httpd_head_check(buf + at, end, &rules, &again) !=
		    h.status || again.body != h.body ||
		    again.length != h.length)
			abort();
		fuzz_with_token(buf + at, end, &h, &rules);
		if (h.status != 0 || h.body == HTTPD_BODY_CHUNKED ||
		    h.length > size - at - end)
			break;
		at += end + (size_t)h.length;
	}
	return 0;
}
