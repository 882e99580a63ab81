/*
 * Unit tests for daemon/net/ws-conn.c and daemon/ws/ws-msg.c: the upgrade key
 * of RFC 6455 section 1.3, its example frames (section 5.7), and what
 * the server sends for each kind of bad input: the error event first,
 * then a close frame with the right code.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ws-conn.h"
#include "ws.h"

struct conn {
	uint8_t		 in[4096];
	size_t		 in_len, in_off;
	uint8_t		 out[4096];
	size_t		 out_len;
	char		 msg[256];	/* last message, as text */
	int		 n_msgs, binary;
	enum proto_error failed;
	size_t		 out_at_failed;
	size_t		 unsent;	/* what io_unsent reports */
	struct ws_conn	*c;
};

static size_t
io_read(void *arg, uint8_t *buf, size_t len)
{
	struct conn *t = arg;
	size_t n = t->in_len - t->in_off;

	n = n < len ? n : len;
	memcpy(buf, t->in + t->in_off, n);
	t->in_off += n;
	return n;
}

static int
io_write(void *arg, const uint8_t *buf, size_t len)
{
	struct conn *t = arg;

	assert_true(t->out_len + len <= sizeof(t->out));
	memcpy(t->out + t->out_len, buf, len);
	t->out_len += len;
	return 0;
}

static void
io_message(void *arg, int binary, const uint8_t *p, size_t n)
{
	struct conn *t = arg;

	t->n_msgs++;
	t->binary = binary;
	snprintf(t->msg, sizeof(t->msg), "%.*s", (int)n, (const char *)p);
}

/* As sottod's peer: the error event (here just its code name). */
static void
io_failed(void *arg, enum proto_error e, const char *msg)
{
	struct conn *t = arg;
	const char *name = proto_error_name(e);

	t->failed = e;
	assert_true(strlen(msg) > 10);
	assert_int_equal(ws_conn_send_text(t->c, name, strlen(name)), 0);
	t->out_at_failed = t->out_len;
}

static size_t
io_unsent(void *arg)
{
	struct conn *t = arg;

	return t->unsent;
}

static const struct ws_conn_io io = {
	io_read, io_write, io_message, io_failed, io_unsent,
};

static struct conn *
conn_new(size_t max)
{
	struct conn *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->c = ws_conn_new(&io, t, max);
	assert_non_null(t->c);
	return t;
}

static void
conn_free(struct conn *t)
{
	ws_conn_free(t->c);
	free(t);
}

static void
feed(struct conn *t, const void *p, size_t n)
{
	memcpy(t->in + t->in_len, p, n);
	t->in_len += n;
}

/* A masked client frame with a 7-bit length. */
static void
feed_frame(struct conn *t, uint8_t b0, const char *payload, size_t n)
{
	static const uint8_t key[4] = { 0x37, 0xfa, 0x21, 0x3d };
	uint8_t hdr[6] = { b0, (uint8_t)(0x80 | n), 0x37, 0xfa, 0x21, 0x3d };
	size_t i;

	assert_true(n < 126);
	feed(t, hdr, sizeof(hdr));
	for (i = 0; i < n; i++)
		t->in[t->in_len++] = (uint8_t)payload[i] ^ key[i % 4];
}

/* The output ends with a close frame of code. */
static void
assert_closed_with(struct conn *t, uint16_t code)
{
	const uint8_t *c = t->out + t->out_at_failed;

	assert_true(t->out_len >= t->out_at_failed + 4);
	assert_int_equal(c[0], 0x88);
	assert_true(c[1] >= 2 && c[1] < 126);
	assert_int_equal(c[2] << 8 | c[3], code);
	assert_int_equal(t->out_len, t->out_at_failed + 2 + c[1]);
	assert_true(ws_conn_closed(t->c));
}

static void
test_accept_key(void **state)
{
	char accept[WS_ACCEPT_KEY_BYTES];

	(void)state;
	/* RFC 6455 section 1.3's example. */
	assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", accept),
	    0);
	assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	assert_int_equal(ws_accept_key("", accept), -1);
	assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=", accept),
	    -1);
	assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ!!", accept),
	    -1);
	/* 18 bytes, not 16. */
	assert_int_equal(ws_accept_key("AAAAAAAAAAAAAAAAAAAAAAAA", accept),
	    -1);
}

static void
test_rfc_frames(void **state)
{
	/* Section 5.7: a masked text "Hello", and a ping "Hello". */
	static const uint8_t hello[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d,
	    0x7f, 0x9f, 0x4d, 0x51, 0x58 };
	struct conn *t = conn_new(1024);

	(void)state;
	feed(t, hello, sizeof(hello));
	feed_frame(t, 0x89, "Hello", 5);
	/* A fragmented binary message with a ping between its frames. */
	feed_frame(t, 0x02, "ab", 2);
	feed_frame(t, 0x89, "", 0);
	feed_frame(t, 0x80, "cd", 2);
	assert_int_equal(ws_conn_recv(t->c, 0), 0);
	assert_int_equal(t->n_msgs, 2);
	assert_int_equal(t->binary, 1);
	assert_string_equal(t->msg, "abcd");
	/* Two pongs, the first carrying the ping's "Hello". */
	assert_int_equal(t->out_len, 7 + 2);
	assert_memory_equal(t->out, "\x8a\x05Hello\x8a\x00", 9);
	assert_int_equal(t->failed, PROTO_OK);

	/* Our text message, unmasked. */
	assert_int_equal(ws_conn_send_text(t->c, "{}", 2), 0);
	assert_memory_equal(t->out + 9, "\x81\x02{}", 4);

	/* The client closes: wslay answers with the same code. */
	feed_frame(t, 0x88, "\x03\xe8", 2);
	assert_int_equal(ws_conn_recv(t->c, 0), -1);
	assert_memory_equal(t->out + 13, "\x88\x02\x03\xe8", 4);
	assert_int_equal(ws_conn_send_text(t->c, "{}", 2), -1);
	conn_free(t);
}

static void
test_unmasked(void **state)
{
	static const uint8_t hello[] = { 0x81, 0x05, 0x48, 0x65, 0x6c, 0x6c,
	    0x6f };
	struct conn *t = conn_new(1024);

	(void)state;
	feed(t, hello, sizeof(hello));
	assert_int_equal(ws_conn_recv(t->c, 0), -1);
	assert_int_equal(t->n_msgs, 0);
	assert_int_equal(t->failed, PROTO_E_BAD_FRAME);
	/* The error event, then the close. */
	assert_memory_equal(t->out, "\x81\x09" "bad_frame", 11);
	assert_closed_with(t, WS_CLOSE_PROTOCOL);
	conn_free(t);
}

static void
test_long_ping(void **state)
{
	static const uint8_t ping[] = { 0x89, 0xfe, 0x00, 0x7e, 1, 2, 3, 4 };
	struct conn *t = conn_new(1024);

	(void)state;
	/* A control frame over 125 bytes: wslay's frame layer refuses it. */
	feed(t, ping, sizeof(ping));
	assert_int_equal(ws_conn_recv(t->c, 0), -1);
	assert_int_equal(t->failed, PROTO_E_BAD_FRAME);
	assert_closed_with(t, WS_CLOSE_PROTOCOL);
	conn_free(t);
}

static void
test_bad_utf8(void **state)
{
	struct conn *t = conn_new(1024);

	(void)state;
	feed_frame(t, 0x81, "{\"a\":\"\xff\"}", 10);
	assert_int_equal(ws_conn_recv(t->c, 0), -1);
	assert_int_equal(t->n_msgs, 0);
	assert_int_equal(t->failed, PROTO_E_BAD_FRAME);
	assert_closed_with(t, WS_CLOSE_BAD_DATA);
	conn_free(t);
}

static void
test_too_big(void **state)
{
	struct conn *t = conn_new(16);

	(void)state;
	feed_frame(t, 0x82, "0123456789abcdef", 16);
	feed_frame(t, 0x02, "0123456789", 10);
	feed_frame(t, 0x80, "0123456789", 10);
	assert_int_equal(ws_conn_recv(t->c, 0), -1);
	assert_int_equal(t->n_msgs, 1);
	assert_int_equal(t->failed, PROTO_E_TOO_LARGE);
	assert_closed_with(t, WS_CLOSE_TOO_BIG);
	conn_free(t);
}

static void
test_rate(void **state)
{
	struct conn *t = conn_new(1024);
	int i;

	(void)state;
	/* A second's worth at once, then one more: refused. */
	for (i = 0; i < WS_CONN_MSG_RATE + 1; i++)
		feed_frame(t, 0x82, "x", 1);
	assert_int_equal(ws_conn_recv(t->c, 10.0), -1);
	assert_int_equal(t->n_msgs, WS_CONN_MSG_RATE);
	assert_int_equal(t->failed, PROTO_E_TOO_FAST);
	assert_closed_with(t, WS_CLOSE_POLICY);
	conn_free(t);

	/* The same spread over time is fine. */
	t = conn_new(1024);
	for (i = 0; i < 3 * WS_CONN_MSG_RATE; i++) {
		t->in_len = t->in_off = 0;
		feed_frame(t, 0x82, "x", 1);
		assert_int_equal(ws_conn_recv(t->c, i * 1.0 /
		    WS_CONN_MSG_RATE), 0);
	}
	assert_int_equal(t->n_msgs, 3 * WS_CONN_MSG_RATE);
	assert_int_equal(t->failed, PROTO_OK);
	conn_free(t);
}

/* The output's last frame is a close with code and no reason. */
static void
assert_ends_with_close(struct conn *t, uint16_t code)
{
	const uint8_t *c = t->out + t->out_len - 4;

	assert_true(t->out_len >= 4);
	assert_int_equal(c[0], 0x88);
	assert_int_equal(c[1], 2);
	assert_int_equal(c[2] << 8 | c[3], code);
}

/* Pings count against the rate: each costs a pong. */
static void
test_ping_rate(void **state)
{
	struct conn *t = conn_new(1024);
	int i;

	(void)state;
	for (i = 0; i < WS_CONN_MSG_RATE + 1; i++)
		feed_frame(t, 0x89, "", 0);
	assert_int_equal(ws_conn_recv(t->c, 10.0), -1);
	assert_int_equal(t->failed, PROTO_E_TOO_FAST);
	assert_ends_with_close(t, WS_CLOSE_POLICY);
	conn_free(t);
}

/*
 * A client that pings but leaves its output unread past the bound is a
 * slow reader; under the bound, or with none set, its pings are answered.
 */
static void
test_max_unsent(void **state)
{
	struct conn *t = conn_new(1024);

	(void)state;
	t->unsent = 5000;
	feed_frame(t, 0x89, "p", 1);
	assert_int_equal(ws_conn_recv(t->c, 1.0), 0);	/* no bound yet */
	assert_int_equal(t->failed, PROTO_OK);
	ws_conn_set_max_unsent(t->c, 8000);
	feed_frame(t, 0x89, "p", 1);
	assert_int_equal(ws_conn_recv(t->c, 1.1), 0);
	assert_int_equal(t->failed, PROTO_OK);
	t->unsent = 9000;
	feed_frame(t, 0x89, "p", 1);
	assert_int_equal(ws_conn_recv(t->c, 1.2), -1);
	assert_int_equal(t->failed, PROTO_E_SLOW_READER);
	assert_ends_with_close(t, WS_CLOSE_POLICY);
	conn_free(t);
}

static void
test_msg_frame(void **state)
{
	struct proto_frame f;
	char msg[PROTO_MSG_MAX];

	(void)state;
#define M(s)	(const uint8_t *)(s), strlen(s)
	assert_int_equal(ws_msg_frame(1, M("\x01\x02"), &f, msg), PROTO_OK);
	assert_int_equal(f.type, MSG_AUDIO);
	assert_int_equal(f.len, 2);
	assert_int_equal(ws_msg_frame(0, M("{\"rate\":48000}"), &f, msg),
	    PROTO_OK);
	assert_int_equal(f.type, MSG_OPEN);
	assert_int_equal(ws_msg_frame(0, M(" {\"type\":\"end\"}\n"), &f, msg),
	    PROTO_OK);
	assert_int_equal(f.type, MSG_END);
	assert_int_equal(ws_msg_frame(0, M("{\"type\":\"subscribe\"}"), &f,
	    msg), PROTO_OK);
	assert_int_equal(f.type, MSG_SUBSCRIBE);
	assert_int_equal(ws_msg_frame(0, M("{\"type\":\"status\"}"), &f, msg),
	    PROTO_OK);
	assert_int_equal(f.type, MSG_STATUS);
	assert_int_equal(ws_msg_frame(0, M("{\"type\":\"hello\"}"), &f, msg),
	    PROTO_E_BAD_VALUE);
	assert_non_null(strstr(msg, "hello"));
	assert_int_equal(ws_msg_frame(0, M("{\"type\":1}"), &f, msg),
	    PROTO_E_BAD_JSON);
	assert_int_equal(ws_msg_frame(0, M("[]"), &f, msg), PROTO_E_BAD_JSON);
	assert_int_equal(ws_msg_frame(0, M("{} {}"), &f, msg),
	    PROTO_E_BAD_JSON);
	assert_int_equal(ws_msg_frame(0, M("{\"type\":\"end\""), &f, msg),
	    PROTO_E_BAD_JSON);
#undef M
	assert_int_equal(ws_close_code(PROTO_E_TOO_LARGE), 1009);
	assert_int_equal(ws_close_code(PROTO_E_BAD_JSON), 1007);
	assert_int_equal(ws_close_code(PROTO_E_BAD_ORDER), 1008);
	assert_int_equal(ws_close_code(PROTO_E_BUSY), 1013);
	assert_int_equal(ws_close_code(PROTO_E_SHUTDOWN), 1001);
	assert_int_equal(ws_close_code(PROTO_E_INTERNAL), 1011);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accept_key),
		cmocka_unit_test(test_rfc_frames),
		cmocka_unit_test(test_unmasked),
		cmocka_unit_test(test_long_ping),
		cmocka_unit_test(test_bad_utf8),
		cmocka_unit_test(test_too_big),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_ping_rate),
		cmocka_unit_test(test_max_unsent),
		cmocka_unit_test(test_msg_frame),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
