/*
 * A request's header block, checked before evhttp reads it (httpd-head.h,
 * docs/http.md "Errors").
 *
 * evhttp stays the HTTP parser: this reads only what the listener must
 * know before evhttp would read on. How long the body is decides where
 * the next request starts, so it is read exactly as evhttp 2.1 reads it
 * (a body only for the methods evhttp reads one for; Transfer-Encoding
 * chunked, else Content-Length), and whatever two parsers could read two
 * ways is refused instead (RFC 9112: folded lines, a blank before the
 * colon, two Content-Lengths that differ, Transfer-Encoding with
 * Content-Length or other than chunked, NUL or a lone CR). What this
 * does not understand otherwise (a request line that does not parse, a
 * line without a colon) it leaves to evhttp, which refuses it.
 *
 * Refused at once, before the body is read: a body without the token
 * (unless its path needs none), and a body over max_request_bytes
 * announced with Expect: 100-continue (the client waits to be told to
 * send it). Everything is bounded by the block's length (at most
 * HTTPD_HEAD_MAX), and nothing is allocated.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "httpd-head.h"

/* The methods evhttp 2.1 reads a body for (evhttp_method_may_have_body). */
static const char *const httpd_head_body_methods[] = {
	"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "CONNECT",
};

/* The headers the check looks at: the first of each, as evhttp uses. */
struct httpd_fields {
	const char	*auth;
	size_t		 auth_len;
	int		 has_auth;
	int		 n_length;
	uint64_t	 length;
	int		 n_te;
	int		 chunked;
	int		 expect_continue;
};

size_t
httpd_head_end(const char *buf, size_t len, size_t from)
{
	size_t i;

	/* an empty first line is a block of its own (evhttp refuses it) */
	if (len >= 1 && buf[0] == '\n')
		return 1;
	if (len >= 2 && buf[0] == '\r' && buf[1] == '\n')
		return 2;
	/* a LF the last call saw may be followed by what came since */
	for (i = from > 2 ? from - 2 : 0; i < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (i + 1 < len && buf[i + 1] == '\n')
			return i + 2;
		if (i + 2 < len && buf[i + 1] == '\r' && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

static int
httpd_head_refuse(struct httpd_head *h, int status, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

static int
httpd_head_refuse(struct httpd_head *h, int status, const char *code,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(h->msg, sizeof(h->msg), fmt, ap);
	va_end(ap);
	h->status = status;
	h->code = code;
	return status;
}

static int
httpd_head_blank(char c)
{
	return c == ' ' || c == '\t';
}

/* Client bytes for a message: printable ASCII, others as '?'. */
static const char *
httpd_head_quote(char *buf, size_t size, const char *p, size_t n)
{
	size_t i;

	if (n >= size)
		n = size - 1;
	for (i = 0; i < n; i++)
		buf[i] = p[i] >= 0x20 && p[i] < 0x7f ? p[i] : '?';
	buf[n] = '\0';
	return buf;
}

/* p[0..*n) without blanks at either end. */
static const char *
httpd_head_trim(const char *p, size_t *n)
{
	while (*n > 0 && httpd_head_blank(p[0])) {
		p++;
		(*n)--;
	}
	while (*n > 0 && httpd_head_blank(p[*n - 1]))
		(*n)--;
	return p;
}

/* Whether key[0..n) is name, in any case. */
static int
httpd_head_is(const char *key, size_t n, const char *name)
{
	return n == strlen(name) && strncasecmp(key, name, n) == 0;
}

int
httpd_head_bearer(const char *v, size_t len, const char *token)
{
	return httpd_head_scheme(v, len, "Bearer", token);
}

int
httpd_head_scheme(const char *v, size_t len, const char *scheme,
    const char *token)
{
	size_t n = strlen(token), k = strlen(scheme), i;
	unsigned char diff;

	v = httpd_head_trim(v, &len);
	if (n == 0 || len < k + 1 || strncasecmp(v, scheme, k) != 0 ||
	    !httpd_head_blank(v[k]))
		return 0;
	v += k + 1;
	len -= k + 1;
	v = httpd_head_trim(v, &len);
	diff = len != n;
	for (i = 0; i < n; i++)
		diff |= (unsigned char)((i < len ? v[i] : 0) ^ token[i]);
	return diff == 0;
}

/* A Content-Length value: digits only, at most 2^63 - 1. */
static int
httpd_head_length(const char *v, size_t n, uint64_t *ret)
{
	uint64_t x = 0;
	size_t i;

	if (n == 0)
		return -1;
	for (i = 0; i < n; i++) {
		if (v[i] < '0' || v[i] > '9' ||
		    x > (UINT64_C(0x7fffffffffffffff) - (uint64_t)(v[i] - '0')) /
		    10)
			return -1;
		x = x * 10 + (uint64_t)(v[i] - '0');
	}
	*ret = x;
	return 0;
}

/* One "Key: value" line into f; a refusal's status, or 0. */
static int
httpd_head_field(const char *line, size_t n, struct httpd_fields *f,
    struct httpd_head *h)
{
	const char *colon = memchr(line, ':', n), *v;
	char q[48];
	size_t k, vn;
	uint64_t len;

	if (n > 0 && httpd_head_blank(line[0]))
		return httpd_head_refuse(h, 400, "bad_request", "a folded "
		    "header line (obsolete line folding is not accepted)");
	if (colon == NULL)
		return 0;	/* evhttp refuses the request */
	k = (size_t)(colon - line);
	if (k > 0 && httpd_head_blank(line[k - 1]))
		return httpd_head_refuse(h, 400, "bad_request", "a blank "
		    "before the colon of header '%s'",
		    httpd_head_quote(q, sizeof(q), line, k));
	vn = n - k - 1;
	v = httpd_head_trim(colon + 1, &vn);
	if (httpd_head_is(line, k, "Content-Length")) {
		if (httpd_head_length(v, vn, &len) != 0)
			return httpd_head_refuse(h, 400, "bad_request",
			    "Content-Length: '%s' is not a number of bytes",
			    httpd_head_quote(q, sizeof(q), v, vn));
		if (f->n_length++ > 0 && len != f->length)
			return httpd_head_refuse(h, 400, "bad_request", "two "
			    "different Content-Length headers (%llu and %llu)",
			    (unsigned long long)f->length,
			    (unsigned long long)len);
		f->length = len;
	} else if (httpd_head_is(line, k, "Transfer-Encoding")) {
		if (f->n_te++ > 0)
			return httpd_head_refuse(h, 400, "bad_request", "more "
			    "than one Transfer-Encoding header");
		if (!httpd_head_is(v, vn, "chunked"))
			return httpd_head_refuse(h, 400, "bad_request",
			    "Transfer-Encoding: only chunked is understood");
		f->chunked = 1;
	} else if (httpd_head_is(line, k, "Expect")) {
		if (f->expect_continue == 0)
			f->expect_continue = httpd_head_is(v, vn,
			    "100-continue") ? 1 : -1;
	} else if (httpd_head_is(line, k, "Authorization") && !f->has_auth) {
		f->has_auth = 1;
		f->auth = v;
		f->auth_len = vn;
	}
	return 0;
}

/* Whether the request line's target is a path that needs no token. */
static int
httpd_head_open(const char *line, size_t n, const char *const *open)
{
	const char *sp = memchr(line, ' ', n), *end;
	size_t plen, i;

	if (sp == NULL || open == NULL)
		return 0;
	n -= (size_t)(sp + 1 - line);
	line = sp + 1;
	while (n > 0 && line[n - 1] == ' ')
		n--;
	if ((end = memchr(line, ' ', n)) == NULL)
		return 0;	/* no version: evhttp refuses it */
	for (plen = 0; line + plen < end && line[plen] != '?' &&
	    line[plen] != '#'; plen++)
		;
	for (i = 0; open[i] != NULL; i++)
		if (plen == strlen(open[i]) &&
		    memcmp(line, open[i], plen) == 0)
			return 1;
	return 0;
}

/* Whether evhttp reads a body for the request line's method. */
static int
httpd_head_has_body(const char *line, size_t n)
{
	const char *sp = memchr(line, ' ', n);
	size_t i, m;

	if (sp == NULL)
		return 0;
	m = (size_t)(sp - line);
	for (i = 0; i < sizeof(httpd_head_body_methods) /
	    sizeof(httpd_head_body_methods[0]); i++)
		if (m == strlen(httpd_head_body_methods[i]) &&
		    memcmp(line, httpd_head_body_methods[i], m) == 0)
			return 1;
	return 0;
}

/* The fields of every header line after the first; a status, or 0. */
static int
httpd_head_fields(const char *buf, size_t len, size_t at,
    struct httpd_fields *f, struct httpd_head *h)
{
	const char *eol;
	size_t n;

	while (at < len && (eol = memchr(buf + at, '\n', len - at)) != NULL) {
		n = (size_t)(eol - (buf + at));
		if (n > 0 && buf[at + n - 1] == '\r')
			n--;
		if (n == 0)
			break;		/* the blank line */
		if (memchr(buf + at, '\r', n) != NULL)
			return httpd_head_refuse(h, 400, "bad_request", "a "
			    "carriage return inside a header line");
		if (httpd_head_field(buf + at, n, f, h) != 0)
			return h->status;
		at = (size_t)(eol - buf) + 1;
	}
	return 0;
}

int
httpd_head_check(const char *buf, size_t len,
    const struct httpd_head_rules *r, struct httpd_head *h)
{
	struct httpd_fields f;
	const char *eol;
	size_t n;
	int body;

	memset(h, 0, sizeof(*h));
	memset(&f, 0, sizeof(f));
	h->len = len;
	if (len == 0 || (eol = memchr(buf, '\n', len)) == NULL)
		return 0;
	n = (size_t)(eol - buf);
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (memchr(buf, '\0', len) != NULL)
		return httpd_head_refuse(h, 400, "bad_request", "a NUL byte "
		    "in the request line or headers");
	if (httpd_head_fields(buf, len, (size_t)(eol - buf) + 1, &f, h) != 0)
		return h->status;
	if (f.chunked && f.n_length > 0)
		return httpd_head_refuse(h, 400, "bad_request", "both "
		    "Transfer-Encoding and Content-Length");
	body = httpd_head_has_body(buf, n);
	if (body && f.chunked)
		h->body = HTTPD_BODY_CHUNKED;
	else if (body && f.length > 0) {
		h->body = HTTPD_BODY_LENGTH;
		h->length = f.length;
	}
	if (h->body != HTTPD_BODY_NONE && r->token[0] != '\0' &&
	    !httpd_head_open(buf, n, r->open) &&
	    !httpd_head_bearer(f.auth != NULL ? f.auth : "", f.auth_len,
	    r->token))
		return httpd_head_refuse(h, 401, "invalid_api_key", "%s",
		    f.has_auth ? "incorrect API key" : "no API key: send "
		    "Authorization: Bearer TOKEN ([http] token of sottod.conf)");
	if (h->body == HTTPD_BODY_LENGTH && f.expect_continue == 1 &&
	    h->length > r->max_body)
		return httpd_head_refuse(h, 413, "request_too_large", "the "
		    "request body (%llu bytes) is over max_request_bytes (%llu "
		    "bytes)", (unsigned long long)h->length,
		    (unsigned long long)r->max_body);
	return 0;
}
