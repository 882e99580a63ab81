/*
 * daemon/net/httpd-head.c: where a request's header block ends (LF or
 * CRLF lines, piece by piece), the body evhttp reads after it, and what
 * the listener refuses before the body: no token, a body over the limit
 * announced with Expect: 100-continue, framing two parsers could read
 * two ways.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "httpd-head.h"

#define TOKEN	"0123456789abcdef"

static const char *const test_open[] = { "/", "/health", NULL };
static const struct httpd_head_rules test_rules = {
	.token = TOKEN, .max_body = 1000, .open = test_open,
};

/* Check s (its whole header block); returns the status. */
static int
check(const char *s, struct httpd_head *h)
{
	size_t end = httpd_head_end(s, strlen(s), 0);

	assert_true(end > 0);
	return httpd_head_check(s, end, &test_rules, h);
}

static void
test_end(void **state)
{
	const char *s = "GET / HTTP/1.1\r\nHost: x\r\n\r\nbody";
	size_t i, end = 0;

	(void)state;
	assert_int_equal(httpd_head_end(s, strlen(s), 0), 27);
	assert_int_equal(httpd_head_end("GET / HTTP/1.1\nHost: x\n\nb", 25, 0),
	    24);
	assert_int_equal(httpd_head_end("GET / HTTP/1.1\nA: b\r\n\nc", 23, 0),
	    22);
	assert_int_equal(httpd_head_end("\r\nGET", 5, 0), 2);
	assert_int_equal(httpd_head_end("GET / HTTP/1.1\r\nHost: x\r\n", 25, 0),
	    0);
	/* a byte at a time, each look from where the last stopped */
	for (i = 1; i <= strlen(s) && end == 0; i++)
		end = httpd_head_end(s, i, i - 1);
	assert_int_equal(end, 27);
}

static void
test_bodies(void **state)
{
	struct httpd_head h;

	(void)state;
	assert_int_equal(check("POST /v1/models HTTP/1.1\r\nAuthorization: "
	    "Bearer " TOKEN "\r\ncontent-length:  12 \r\n\r\n", &h), 0);
	assert_int_equal(h.body, HTTPD_BODY_LENGTH);
	assert_int_equal(h.length, 12);
	assert_int_equal(check("PUT /x HTTP/1.1\r\nAuthorization: Bearer "
	    TOKEN "\r\nTransfer-Encoding: Chunked\r\n\r\n", &h), 0);
	assert_int_equal(h.body, HTTPD_BODY_CHUNKED);
	/* evhttp reads no body for HEAD, TRACE or a method it does not know */
	assert_int_equal(check("HEAD / HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
	    &h), 0);
	assert_int_equal(h.body, HTTPD_BODY_NONE);
	assert_int_equal(check("BREW /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n",
	    &h), 0);
	assert_int_equal(h.body, HTTPD_BODY_NONE);
	assert_int_equal(check("GET /x HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
	    &h), 0);
	assert_int_equal(h.body, HTTPD_BODY_NONE);
	/* the same length twice is one length */
	assert_int_equal(check("GET /health HTTP/1.1\r\nContent-Length: 3\r\n"
	    "Content-Length: 3\r\n\r\n", &h), 0);
	assert_int_equal(h.length, 3);
}

static void
test_token(void **state)
{
	struct httpd_head h;

	(void)state;
	assert_int_equal(check("POST /v1/audio/transcriptions HTTP/1.1\r\n"
	    "Content-Length: 5\r\n\r\n", &h), 401);
	assert_string_equal(h.code, "invalid_api_key");
	assert_non_null(strstr(h.msg, "no API key"));
	assert_int_equal(check("POST /v1/models HTTP/1.1\r\nAuthorization: "
	    "Bearer nope\r\nContent-Length: 5\r\n\r\n", &h), 401);
	assert_string_equal(h.msg, "incorrect API key");
	/* no body: the route answers it (a 401 there too, or 200 /health) */
	assert_int_equal(check("GET /metrics HTTP/1.1\r\n\r\n", &h), 0);
	/* a path that needs no token, with its query */
	assert_int_equal(check("POST /health?x=1 HTTP/1.1\r\nContent-Length: "
	    "5\r\n\r\n", &h), 0);
	assert_int_equal(check("POST /healthz HTTP/1.1\r\nContent-Length: "
	    "5\r\n\r\n", &h), 401);
	assert_true(httpd_head_bearer("bearer \t" TOKEN "  ", 26, TOKEN));
	assert_false(httpd_head_bearer("Bearer " TOKEN "0", 24, TOKEN));
	assert_false(httpd_head_bearer("Basic " TOKEN, 22, TOKEN));
	assert_false(httpd_head_bearer("Bearer ", 7, ""));
}

static void
test_refused(void **state)
{
	static const struct {
		const char	*head, *msg;
		int		 status;
	} cases[] = {
		{ "POST /x HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: "
		    "1001\r\nAuthorization: Bearer " TOKEN "\r\n\r\n",
		    "the request body (1001 bytes) is over max_request_bytes "
		    "(1000 bytes)", 413 },
		{ "GET / HTTP/1.1\r\nContent-Length: 0\r\nContent-Length: 5"
		    "\r\n\r\n", "two different Content-Length headers (0 and 5)",
		    400 },
		{ "GET / HTTP/1.1\r\nContent-Length: +5\r\n\r\n",
		    "Content-Length: '+5' is not a number of bytes", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n"
		    "\r\n", "Content-Length: '99999999999999999999' is not a "
		    "number of bytes", 400 },
		{ "GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
		    "Content-Length: 5\r\n\r\n", "both Transfer-Encoding and "
		    "Content-Length", 400 },
		{ "GET / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		    "Transfer-Encoding: only chunked is understood", 400 },
		{ "GET / HTTP/1.1\r\nA: b\r\n  c\r\n\r\n", "a folded header line "
		    "(obsolete line folding is not accepted)", 400 },
		{ "GET / HTTP/1.1\r\nContent-Length : 5\r\n\r\n", "a blank "
		    "before the colon of header 'Content-Length '", 400 },
		{ "GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", "a carriage return inside "
		    "a header line", 400 },
	};
	struct httpd_head h;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		assert_int_equal(check(cases[i].head, &h), cases[i].status);
		assert_string_equal(h.msg, cases[i].msg);
	}
	/* the limit without Expect is evhttp's to answer, after the body */
	assert_int_equal(check("POST /x HTTP/1.1\r\nContent-Length: 1001\r\n"
	    "Authorization: Bearer " TOKEN "\r\n\r\n", &h), 0);
	/* NUL in a header, and bytes outside ASCII quoted as '?' */
	assert_int_equal(httpd_head_check("GET / HTTP/1.1\r\nA:\0\r\n\r\n", 22,
	    &test_rules, &h), 400);
	assert_int_equal(check("GET / HTTP/1.1\r\nContent-Length: 5\xff\r\n\r\n",
	    &h), 400);
	assert_string_equal(h.msg, "Content-Length: '5?' is not a number of "
	    "bytes");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_end),
		cmocka_unit_test(test_bodies),
		cmocka_unit_test(test_token),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
