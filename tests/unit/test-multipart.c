/*
 * daemon/http/multipart.c: Content-Type boundaries and multipart/form-data
 * bodies as HTTP clients send them (the openai SDK's httpx, curl -F,
 * browsers' FormData), and the malformed bodies each error names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "multipart.h"

#define B(s)	((const uint8_t *)(s)), (sizeof(s) - 1)

static void
test_boundaries(void **state)
{
	char b[MULTIPART_BOUNDARY_MAX], msg[256];

	(void)state;
	assert_int_equal(multipart_boundary("multipart/form-data; "
	    "boundary=abc123", b, msg, sizeof(msg)), 0);
	assert_string_equal(b, "abc123");
	assert_int_equal(multipart_boundary("Multipart/Form-Data;charset=x;"
	    "BOUNDARY=\"a b:c?\"", b, msg, sizeof(msg)), 0);
	assert_string_equal(b, "a b:c?");
	assert_int_equal(multipart_boundary("multipart/form-data; "
	    "boundary=---------------------------"
	    "9051914041544843365972754266", b, msg, sizeof(msg)), 0);

	assert_int_equal(multipart_boundary("application/json", b, msg,
	    sizeof(msg)), -1);
	assert_string_equal(msg, "Content-Type must be multipart/form-data, "
	    "not application/json");
	assert_int_equal(multipart_boundary(NULL, b, msg, sizeof(msg)), -1);
	assert_int_equal(multipart_boundary("multipart/form-datax; "
	    "boundary=a", b, msg, sizeof(msg)), -1);
	assert_int_equal(multipart_boundary("multipart/form-data", b, msg,
	    sizeof(msg)), -1);
	assert_string_equal(msg, "Content-Type: no boundary parameter");
	/* 71 characters; a blank at the end; a character outside bchars */
	assert_int_equal(multipart_boundary("multipart/form-data; boundary="
	    "12345678901234567890123456789012345678901234567890123456789012"
	    "345678901", b, msg, sizeof(msg)), -1);
	assert_int_equal(multipart_boundary("multipart/form-data; "
	    "boundary=\"ab \"", b, msg, sizeof(msg)), -1);
	assert_int_equal(multipart_boundary("multipart/form-data; "
	    "boundary=a@b", b, msg, sizeof(msg)), -1);
	assert_int_equal(multipart_boundary("multipart/form-data; "
	    "boundary=\"abc", b, msg, sizeof(msg)), -1);
	assert_string_equal(b, "");
}

/* The shape of the openai SDK's upload (httpx), with a preamble. */
static void
test_openai_body(void **state)
{
	static const char body[] =
	    "ignored preamble\r\n"
	    "--xyz\r\n"
	    "Content-Disposition: form-data; name=\"model\"\r\n"
	    "\r\n"
	    "whisper-1\r\n"
	    "--xyz\r\n"
	    "Content-Disposition: form-data; name=\"file\"; "
	    "filename=\"a \\\"b\\\".wav\"\r\n"
	    "Content-Type: audio/wav\r\n"
	    "\r\n"
	    "RIFF\0\r\n--xy\r\n"
	    "--xyz  \r\n"
	    "content-disposition: form-data; name=empty\r\n"
	    "\r\n"
	    "\r\n"
	    "--xyz--\r\n"
	    "epilogue";
	struct multipart_part p[4];
	char msg[256];

	(void)state;
	assert_int_equal(multipart_parse(B(body), "xyz", p, 4, msg,
	    sizeof(msg)), 3);
	assert_string_equal(p[0].name, "model");
	assert_int_equal(p[0].has_filename, 0);
	assert_int_equal(p[0].len, 9);
	assert_memory_equal(p[0].data, "whisper-1", 9);
	assert_string_equal(p[1].name, "file");
	assert_string_equal(p[1].filename, "a \"b\".wav");
	assert_string_equal(p[1].content_type, "audio/wav");
	assert_int_equal(p[1].len, 11);
	assert_memory_equal(p[1].data, "RIFF\0\r\n--xy", 11);
	assert_string_equal(p[2].name, "empty");
	assert_int_equal(p[2].len, 0);
	/* too many parts for the caller */
	assert_int_equal(multipart_parse(B(body), "xyz", p, 2, msg,
	    sizeof(msg)), -1);
	assert_string_equal(msg, "more than 2 form fields");
}

static void
test_filenames(void **state)
{
	static const char body[] =
	    "--b\r\n"
	    "Content-Disposition: form-data; name=\"f\"; "
	    "filename*=UTF-8''%E2%82%AC%20x.wav; filename=\"fallback\"\r\n"
	    "\r\n"
	    "1\r\n"
	    "--b\r\n"
	    "Content-Disposition: form-data; name=\"g\"; "
	    "filename=\"C:\\dir\\x.wav\"\r\n"
	    "\r\n"
	    "2\r\n"
	    "--b--";
	struct multipart_part p[2];
	char msg[256];

	(void)state;
	assert_int_equal(multipart_parse(B(body), "b", p, 2, msg,
	    sizeof(msg)), 2);
	assert_string_equal(p[0].filename, "\xe2\x82\xac x.wav");
	assert_string_equal(p[1].filename, "C:\\dir\\x.wav");
}

static void
expect_bad(const char *body, const char *want)
{
	struct multipart_part p[4];
	char msg[256];

	assert_int_equal(multipart_parse((const uint8_t *)body, strlen(body),
	    "b", p, 4, msg, sizeof(msg)), -1);
	if (strstr(msg, want) == NULL)
		fail_msg("%s: got \"%s\", want \"%s\"", body, msg, want);
}

static void
test_malformed(void **state)
{
	(void)state;
	expect_bad("", "no delimiter line");
	expect_bad("--c\r\n\r\n--c--", "no delimiter line");
	expect_bad("--b--", "no parts");
	expect_bad("--bx\r\n", "does not end in CRLF");
	expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n"
	    "data without an end", "no closing delimiter");
	expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n\r\n"
	    "x\r\n--b", "does not end in CRLF");
	expect_bad("--b\r\nContent-Disposition: form-data; name=a",
	    "do not end with an empty line");
	expect_bad("--b\r\n\r\nx\r\n--b--", "without Content-Disposition");
	expect_bad("--b\r\nContent-Type: text/plain\r\n\r\nx\r\n--b--",
	    "without Content-Disposition");
	expect_bad("--b\r\nContent-Disposition: attachment; name=a\r\n\r\n"
	    "x\r\n--b--", "not form-data with a name");
	expect_bad("--b\r\nContent-Disposition: form-data; name=\"a\r\n\r\n"
	    "x\r\n--b--", "not form-data with a name");
	expect_bad("--b\r\nContent-Disposition: form-data; filename=a\r\n"
	    "\r\nx\r\n--b--", "not form-data with a name");
	expect_bad("--b\r\nContent-Disposition: form-data; name=a\r\n"
	    " folded\r\n\r\nx\r\n--b--", "folded");
	expect_bad("--b\r\nno colon\r\n\r\nx\r\n--b--", "without a name");
	expect_bad("--b\r\nContent-Disposition: form-data; name=a; "
	    "filename*=UTF-8''%00\r\n\r\nx\r\n--b--", "not form-data");
}

static void
test_header_limit(void **state)
{
	static char body[MULTIPART_HEADERS_MAX + 256];
	struct multipart_part p[1];
	char msg[256];
	size_t n;

	(void)state;
	n = (size_t)snprintf(body, sizeof(body), "--b\r\nContent-"
	    "Disposition: form-data; name=a\r\nX-Pad: ");
	memset(body + n, 'x', MULTIPART_HEADERS_MAX);
	n += MULTIPART_HEADERS_MAX;
	n += (size_t)snprintf(body + n, sizeof(body) - n, "\r\n\r\n1\r\n"
	    "--b--");
	assert_int_equal(multipart_parse((const uint8_t *)body, n, "b", p, 1,
	    msg, sizeof(msg)), -1);
	assert_non_null(strstr(msg, "8 KiB"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_boundaries),
		cmocka_unit_test(test_openai_body),
		cmocka_unit_test(test_filenames),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_header_limit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
