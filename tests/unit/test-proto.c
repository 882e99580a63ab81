/*
 * Unit tests for common/proto.c: frame headers and JSON payloads round
 * trip; truncated, oversized, unknown, malformed and mistyped input is
 * rejected with the right error code and a message; the JSON reader that
 * the Wyoming and WebSocket sides share names what is wrong.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "proto.h"

#define S(x)	(const uint8_t *)(x), strlen(x)

/* A frame of type with payload p (n bytes), into buf; returns its size. */
static size_t
frame(uint8_t *buf, uint8_t type, const void *p, size_t n)
{
	proto_frame_header(buf, type, n);
	memcpy(buf + PROTO_HEADER_BYTES, p, n);
	return PROTO_HEADER_BYTES + n;
}

static void
test_frame_round_trip(void **state)
{
	uint8_t buf[64], two[128];
	struct proto_frame f;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	size_t n, used, k;

	(void)state;
	n = frame(buf, MSG_AUDIO, "\x01\x02\x03", 3);
	assert_int_equal(n, 8);
	assert_memory_equal(buf, "\x04\x00\x00\x00\x04", 5);
	assert_int_equal(proto_frame_parse(buf, n, 16, &f, &used, &e, msg), 1);
	assert_int_equal(f.type, MSG_AUDIO);
	assert_int_equal(f.len, 3);
	assert_ptr_equal(f.payload, buf + 5);
	assert_int_equal(used, n);

	/* An empty payload (END) and two frames back to back. */
	k = frame(two, MSG_END, "", 0);
	k += frame(two + k, MSG_STATUS, "{}", 2);
	assert_int_equal(proto_frame_parse(two, k, 16, &f, &used, &e, msg), 1);
	assert_int_equal(f.type, MSG_END);
	assert_int_equal(f.len, 0);
	assert_int_equal(used, 5);
	assert_int_equal(proto_frame_parse(two + used, k - used, 16, &f, &used,
	    &e, msg), 1);
	assert_int_equal(f.type, MSG_STATUS);
	assert_memory_equal(f.payload, "{}", 2);
}

static void
test_frame_truncated(void **state)
{
	uint8_t buf[64];
	struct proto_frame f;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	size_t n, i, used;

	(void)state;
	n = frame(buf, MSG_HELLO, "{\"protocol\":1}", 14);
	for (i = 0; i < n; i++)
		assert_int_equal(proto_frame_parse(buf, i, 1024, &f, &used, &e,
		    msg), 0);
	assert_int_equal(proto_frame_parse(buf, n, 1024, &f, &used, &e, msg),
	    1);
}

static void
test_frame_bad_header(void **state)
{
	uint8_t zero[5] = { 0, 0, 0, 0, MSG_HELLO };
	uint8_t big[5] = { 0xff, 0xff, 0xff, 0xff, MSG_AUDIO };
	uint8_t unknown[6] = { 2, 0, 0, 0, 0x42, 0 };
	uint8_t limit[5];
	struct proto_frame f;
	enum proto_error e = PROTO_OK;
	char msg[PROTO_MSG_MAX];
	size_t used;

	(void)state;
	assert_int_equal(proto_frame_parse(zero, 5, 1024, &f, &used, &e, msg),
	    -1);
	assert_int_equal(e, PROTO_E_BAD_FRAME);
	assert_int_equal(proto_frame_parse(big, 5, PROTO_MAX_FRAME_BYTES, &f,
	    &used, &e, msg), -1);
	assert_int_equal(e, PROTO_E_TOO_LARGE);
	assert_non_null(strstr(msg, "limit"));
	assert_int_equal(proto_frame_parse(unknown, 6, 1024, &f, &used, &e,
	    msg), -1);
	assert_int_equal(e, PROTO_E_BAD_FRAME);
	assert_non_null(strstr(msg, "0x42"));
	/* Exactly the limit passes the header check; one more does not. */
	proto_frame_header(limit, MSG_AUDIO, 1024);
	assert_int_equal(proto_frame_parse(limit, 5, 1024, &f, &used, &e,
	    msg), 0);
	proto_frame_header(limit, MSG_AUDIO, 1025);
	assert_int_equal(proto_frame_parse(limit, 5, 1024, &f, &used, &e,
	    msg), -1);
	assert_int_equal(e, PROTO_E_TOO_LARGE);
}

static void
test_hello(void **state)
{
	struct msg_hello h;
	char msg[PROTO_MSG_MAX];

	(void)state;
	assert_int_equal(proto_parse_hello(S("{\"protocol\":1,\"client\":"
	    "\"sotto/0.1.0\"}"), &h, msg), PROTO_OK);
	assert_int_equal(h.protocol, 1);
	assert_string_equal(h.client, "sotto/0.1.0");
	assert_int_equal(proto_parse_hello(S(" {\"protocol\":7,\"x\":[1]}\n"),
	    &h, msg), PROTO_OK);
	assert_int_equal(h.protocol, 7);
	assert_int_equal(proto_parse_hello(S("{}"), &h, msg),
	    PROTO_E_BAD_JSON);
	assert_int_equal(proto_parse_hello(S("{\"protocol\":\"1\"}"), &h,
	    msg), PROTO_E_BAD_JSON);
	assert_non_null(strstr(msg, "integer"));
	assert_int_equal(proto_parse_hello(S("{\"protocol\":1.5}"), &h, msg),
	    PROTO_E_BAD_JSON);
	assert_int_equal(proto_parse_hello(S("{\"protocol\":-1}"), &h, msg),
	    PROTO_E_BAD_VALUE);
	assert_int_equal(proto_parse_hello(S("{\"protocol\":1,\"client\":2}"),
	    &h, msg), PROTO_E_BAD_JSON);
}

static void
test_bad_json(void **state)
{
	static const char *const bad[] = { "", "{", "{\"protocol\":1",
	    "[1]", "1", "null", "\"s\"", "{\"protocol\":1}{}",
	    "{\"protocol\":1} x", "{\"protocol\":1,}",
	    "{\"protocol\":01}", "\xff\xfe", "{\"client\":\"\xc3\x28\"}" };
	struct msg_hello h;
	char msg[PROTO_MSG_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		msg[0] = '\0';
		assert_int_equal(proto_parse_hello(S(bad[i]), &h, msg),
		    PROTO_E_BAD_JSON);
		assert_true(msg[0] != '\0');
	}
	/* A NUL inside the payload. */
	assert_int_equal(proto_parse_hello((const uint8_t *)
	    "{\"protocol\":1}\0", 15, &h, msg), PROTO_E_BAD_JSON);
	/* Nesting deeper than the tokenizer allows. */
	assert_int_equal(proto_parse_hello(S("{\"a\":[[[[[[[[[[[[1]]]]]]]]]]]],"
	    "\"protocol\":1}"), &h, msg), PROTO_E_BAD_JSON);
}

/*
 * The one reader of clients' JSON (proto, Wyoming and WebSocket): each
 * kind of bad input is named, whitespace around the object is allowed,
 * and depth is the caller's.
 */
static void
test_json_object(void **state)
{
#define C(x)	x, sizeof(x) - 1
	static const struct {
		const char	*in;
		size_t		 len;
		const char	*why;	/* start of the reason; NULL: parsed */
	} cases[] = {
		{ C(""), "empty, expected a JSON object" },
		{ C("{}\0"), "a NUL byte in the JSON" },
		{ C("{\"a\":"), "bad JSON: truncated" },
		{ C("{\"a\" 1}"), "bad JSON: " },
		{ C("{} {}"), "bad JSON: unexpected character" },
		{ C("[1]"), "not a JSON object" },
		{ C("\xc3\x28"), "bad JSON: " },
		{ C(" \t{\"a\":[1]}\r\n"), NULL },
	};
	struct json_object *o;
	char why[PROTO_MSG_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		why[0] = '\0';
		o = proto_json_object(cases[i].in, cases[i].len, 8, why);
		if (cases[i].why == NULL) {
			if (o == NULL)
				fail_msg("case %zu: %s", i, why);
			json_object_put(o);
			continue;
		}
		assert_null(o);
		if (strncmp(why, cases[i].why, strlen(cases[i].why)) != 0)
			fail_msg("case %zu: \"%s\", want \"%s...\"", i, why,
			    cases[i].why);
	}
	/* Depth 3 takes {"a":[1]} and refuses one level more. */
	o = proto_json_object("{\"a\":[1]}", 9, 3, why);
	assert_non_null(o);
	json_object_put(o);
	assert_null(proto_json_object("{\"a\":[[1]]}", 11, 3, why));
	assert_string_equal(why, "bad JSON: nesting too deep");
	/* why may be NULL. */
	assert_null(proto_json_object("[]", 2, 8, NULL));
#undef C
}

static void
test_open(void **state)
{
	struct msg_open m;
	char msg[PROTO_MSG_MAX];

	(void)state;
	assert_int_equal(proto_parse_open(S("{}"), &m, msg), PROTO_OK);
	assert_int_equal(m.format, PROTO_FORMAT_S16LE);
	assert_int_equal(m.rate, 16000);
	assert_int_equal(m.channels, 1);
	assert_int_equal(m.task, PROTO_TASK_TRANSCRIBE);
	assert_string_equal(m.language, "");
	assert_string_equal(m.session, "");
	assert_int_equal(m.since, -1);
	assert_int_equal(m.live, 0);
	assert_int_equal(m.word_timestamps, 0);
	assert_int_equal(m.diarize, 0);
	assert_int_equal(proto_parse_open(S("{\"format\":\"opus\",\"rate\":"
	    "48000,\"channels\":2,\"language\":\"de\",\"task\":\"translate\","
	    "\"session\":\"ab12-_\",\"since\":41,\"live\":true,"
	    "\"word_timestamps\":true,\"diarize\":true}"), &m, msg), PROTO_OK);
	assert_int_equal(m.word_timestamps, 1);
	assert_int_equal(m.diarize, 1);
	assert_int_equal(m.format, PROTO_FORMAT_OPUS);
	assert_int_equal(m.rate, 48000);
	assert_int_equal(m.channels, 2);
	assert_string_equal(m.language, "de");
	assert_int_equal(m.task, PROTO_TASK_TRANSLATE);
	assert_string_equal(m.session, "ab12-_");
	assert_int_equal(m.since, 41);
	assert_int_equal(m.live, 1);
	assert_int_equal(proto_parse_open(S("{\"live\":false}"), &m, msg),
	    PROTO_OK);
	assert_int_equal(m.live, 0);
}

static void
test_open_bad_fields(void **state)
{
	static const struct {
		const char *json;
		enum proto_error e;
	} cases[] = {
		{ "{\"format\":\"mp3\"}", PROTO_E_BAD_VALUE },
		{ "{\"format\":1}", PROTO_E_BAD_JSON },
		{ "{\"rate\":\"16000\"}", PROTO_E_BAD_JSON },
		{ "{\"rate\":0}", PROTO_E_BAD_VALUE },
		{ "{\"rate\":99999999999}", PROTO_E_BAD_VALUE },
		{ "{\"channels\":0}", PROTO_E_BAD_VALUE },
		{ "{\"channels\":33}", PROTO_E_BAD_VALUE },
		{ "{\"format\":\"opus\",\"channels\":3}", PROTO_E_BAD_VALUE },
		{ "{\"task\":\"summarise\"}", PROTO_E_BAD_VALUE },
		{ "{\"language\":[]}", PROTO_E_BAD_JSON },
		{ "{\"language\":\"aaaaaaaaaaaaaaaaaaaa\"}", PROTO_E_BAD_VALUE },
		{ "{\"session\":\"../etc\"}", PROTO_E_BAD_VALUE },
		{ "{\"session\":\"\"}", PROTO_E_BAD_VALUE },
		{ "{\"session\":7}", PROTO_E_BAD_JSON },
		{ "{\"since\":-2}", PROTO_E_BAD_VALUE },
		{ "{\"since\":true}", PROTO_E_BAD_JSON },
		{ "{\"live\":1}", PROTO_E_BAD_JSON },
		{ "{\"live\":\"yes\"}", PROTO_E_BAD_JSON },
		{ "{\"word_timestamps\":1}", PROTO_E_BAD_JSON },
		{ "{\"diarize\":\"yes\"}", PROTO_E_BAD_JSON },
	};
	struct msg_open m;
	char msg[PROTO_MSG_MAX];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		msg[0] = '\0';
		assert_int_equal(proto_parse_open(S(cases[i].json), &m, msg),
		    cases[i].e);
		assert_true(msg[0] != '\0');
	}
}

static void
test_subscribe_and_empty(void **state)
{
	struct msg_subscribe m;
	char msg[PROTO_MSG_MAX];

	(void)state;
	assert_int_equal(proto_parse_subscribe(S("{\"source\":\"mic\"}"), &m,
	    msg), PROTO_OK);
	assert_string_equal(m.source, "mic");
	assert_int_equal(m.since, PROTO_SINCE_NONE);
	assert_int_equal(proto_parse_subscribe(S("{\"source\":\"mic\","
	    "\"since\":0}"), &m, msg), PROTO_OK);
	assert_int_equal(m.since, 0);
	assert_int_equal(proto_parse_subscribe(S("{}"), &m, msg),
	    PROTO_E_BAD_JSON);
	assert_int_equal(proto_parse_subscribe(S("{\"source\":null}"), &m,
	    msg), PROTO_E_BAD_JSON);
	assert_int_equal(proto_parse_empty(S(""), msg), PROTO_OK);
	assert_int_equal(proto_parse_empty(S("{}"), msg), PROTO_OK);
	assert_int_equal(proto_parse_empty(S("{"), msg), PROTO_E_BAD_JSON);
	assert_int_equal(proto_parse_empty(S("[]"), msg), PROTO_E_BAD_JSON);
}

/* Parse an event string and return the object (caller puts it). */
static struct json_object *
event_json(char *s)
{
	struct json_object *o;
	char type[PROTO_NAME_MAX], msg[PROTO_MSG_MAX];

	assert_non_null(s);
	assert_int_equal(proto_parse_event(S(s), type, msg), PROTO_OK);
	o = json_tokener_parse(s);
	assert_non_null(o);
	assert_string_equal(type, json_object_get_string(
	    json_object_object_get(o, "type")));
	free(s);
	return o;
}

static const char *
field(struct json_object *o, const char *k)
{
	struct json_object *v;

	assert_true(json_object_object_get_ex(o, k, &v));
	return json_object_get_string(v);
}

static void
test_events(void **state)
{
	const struct proto_word words[2] = { { 0.5, 0.75, " Hello", 0.98765 },
	    { 0.75, 1.25, ",", 1.0 } };
	struct proto_segment segs[2] = { { 0.5, 1.25, " Hello", words, 2, 0 },
	    { 1.25, 2.0, " \"world\"\n", NULL, 0, 12 } };
	const struct proto_session_info list[2] = {
	    { "ab12", "ws", "streaming", 12.5, 0.25, 0.125 },
	    { "file-3", "http", "transcribing", -1, -1, -1 } };
	struct proto_status st = { 2, 3, 1, "tiny.en", "fp32", 0.25, 1.5, 10,
	    1, 4, 0, list, 2 };
	struct json_object *o, *a, *w;

	(void)state;
	o = event_json(proto_event_hello("sottod/0.1.0", "tiny.en"));
	assert_string_equal(field(o, "server"), "sottod/0.1.0");
	assert_int_equal(json_object_get_int(json_object_object_get(o,
	    "protocol")), SOTTO_PROTO_VERSION);
	json_object_put(o);

	o = event_json(proto_event_final("s1", 7, segs, 2, 0.25));
	assert_string_equal(field(o, "session"), "s1");
	assert_string_equal(field(o, "id"), "7");
	assert_string_equal(field(o, "lag"), "0.250");
	a = json_object_object_get(o, "segments");
	assert_int_equal(json_object_array_length(a), 2);
	assert_string_equal(field(json_object_array_get_idx(a, 1), "text"),
	    " \"world\"\n");
	assert_string_equal(field(json_object_array_get_idx(a, 0), "end"),
	    "1.250");
	/* words where a segment has them, none where it has not */
	w = json_object_object_get(json_object_array_get_idx(a, 0), "words");
	assert_int_equal(json_object_array_length(w), 2);
	assert_string_equal(field(json_object_array_get_idx(w, 0), "word"),
	    " Hello");
	assert_string_equal(field(json_object_array_get_idx(w, 0), "start"),
	    "0.500");
	assert_string_equal(field(json_object_array_get_idx(w, 1), "end"),
	    "1.250");
	assert_string_equal(field(json_object_array_get_idx(w, 0),
	    "probability"), "0.9877");
	assert_false(json_object_object_get_ex(json_object_array_get_idx(a,
	    1), "words", NULL));
	/* a speaker where a segment has one (live labels), none without */
	assert_false(json_object_object_get_ex(json_object_array_get_idx(a,
	    0), "speaker", NULL));
	assert_string_equal(field(json_object_array_get_idx(a, 1), "speaker"),
	    "S12");
	json_object_put(o);

	o = event_json(proto_event_partial("s1", "caf\xc3\xa9 \xe2\x82", 3, 4,
	    1.5));
	assert_string_equal(field(o, "text"), "caf\xc3\xa9 \xef\xbf\xbd"
	    "\xef\xbf\xbd");
	assert_string_equal(field(o, "lag"), "1.500");
	json_object_put(o);

	o = event_json(proto_event_error(PROTO_E_SLOW_READER, "x"));
	assert_string_equal(field(o, "code"), "slow_reader");
	json_object_put(o);
	o = event_json(proto_event_status(&st));
	assert_string_equal(field(o, "model"), "tiny.en");
	assert_string_equal(field(o, "compute"), "fp32");
	assert_string_equal(field(o, "mic"), "capturing");
	a = json_object_object_get(o, "session_list");
	assert_int_equal(json_object_array_length(a), 2);
	w = json_object_array_get_idx(a, 0);
	assert_string_equal(field(w, "id"), "ab12");
	assert_string_equal(field(w, "source"), "ws");
	assert_string_equal(field(w, "audio_s"), "12.500");
	assert_string_equal(field(w, "rtf"), "0.125");
	w = json_object_array_get_idx(a, 1);
	assert_true(json_object_object_get_ex(w, "lag_s", NULL));
	assert_null(json_object_object_get(w, "lag_s"));
	json_object_put(o);
	o = event_json(proto_event_opened("s1", 4, 123));
	assert_string_equal(field(o, "last_final"), "4");
	assert_string_equal(field(o, "audio_frames"), "123");
	json_object_put(o);
	o = event_json(proto_event_language("s1", "de", 0.97654, 1));
	assert_string_equal(field(o, "language"), "de");
	assert_string_equal(field(o, "probability"), "0.9765");
	assert_string_equal(field(o, "settled"), "true");
	json_object_put(o);
	json_object_put(event_json(proto_event_subscribed("mic", "mic")));
	o = event_json(proto_event_end("s1", &(struct proto_end){ 3, 21.25,
	    23.0, 1.5 }));
	assert_string_equal(field(o, "session"), "s1");
	assert_string_equal(field(o, "last_final"), "3");
	assert_string_equal(field(o, "last_final_end"), "21.250");
	assert_string_equal(field(o, "audio_s"), "23.000");
	assert_string_equal(field(o, "undecoded_s"), "1.500");
	json_object_put(o);
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(proto_error_name(PROTO_E_BAD_ORDER), "bad_order");
	assert_string_equal(proto_error_name(PROTO_E_TOO_MANY),
	    "too_many_connections");
	assert_string_equal(proto_error_name(PROTO_E_TIMEOUT), "timeout");
	assert_string_equal(proto_error_name((enum proto_error)999),
	    "internal");
	assert_string_equal(proto_type_name(MSG_SUBSCRIBE), "SUBSCRIBE");
	assert_string_equal(proto_type_name(0x7f), "?");
	assert_int_equal(proto_format_sample_bytes(PROTO_FORMAT_F32LE), 4);
	assert_int_equal(proto_format_sample_bytes(PROTO_FORMAT_OPUS), 0);
	assert_true(proto_session_valid("a"));
	assert_false(proto_session_valid("a b"));
	assert_false(proto_session_valid("0123456789012345678901234567890123"));
}

/* The code the WebSocket doors close with, read back from the event. */
static void
test_event_error_code(void **state)
{
	char *ev;
	int e;

	(void)state;
	for (e = PROTO_E_BAD_FRAME; e <= PROTO_E_TOO_FAST; e++) {
		ev = proto_event_error((enum proto_error)e, "why");
		assert_non_null(ev);
		assert_int_equal(proto_event_error_code(ev), e);
		free(ev);
	}
	assert_int_equal(proto_event_error_code("{\"type\":\"final\"}"),
	    PROTO_OK);
	/* a name that is a prefix of another's, and one sottod never wrote */
	assert_int_equal(proto_event_error_code(
	    "{\"type\":\"error\",\"code\":\"busyness\"}"), PROTO_E_INTERNAL);
	assert_int_equal(proto_event_error_code(
	    "{\"type\":\"error\",\"code\":\"busy\"}"), PROTO_E_BUSY);
}

/* Caption units: since_unit in OPEN and SUBSCRIBE, the unit event. */
static void
test_units(void **state)
{
	struct msg_open o;
	struct msg_subscribe sub;
	struct proto_unit u = { 3, 1.5, 4.25, " Hello there.", "", 1, 7, 9,
	    0 };
	struct json_object *j;
	char msg[PROTO_MSG_MAX], *ev;

	(void)state;
	assert_int_equal(proto_parse_open(S("{}"), &o, msg), PROTO_OK);
	assert_int_equal(o.since_unit, PROTO_SINCE_NONE);
	assert_int_equal(proto_parse_open(S("{\"since_unit\":4}"), &o, msg),
	    PROTO_OK);
	assert_int_equal(o.since_unit, 4);
	assert_int_equal(proto_parse_open(S("{\"since_unit\":-2}"), &o,
	    msg), PROTO_E_BAD_VALUE);
	assert_int_equal(proto_parse_open(S("{\"since_unit\":\"1\"}"), &o,
	    msg), PROTO_E_BAD_JSON);
	assert_int_equal(proto_parse_subscribe(S("{\"source\":\"mic\","
	    "\"since_unit\":-1}"), &sub, msg), PROTO_OK);
	assert_int_equal(sub.since_unit, -1);
	assert_int_equal(sub.since, PROTO_SINCE_NONE);
	/* a unit's speaker (live labels), absent without one */
	u.speaker = 2;
	ev = proto_event_unit("abc", &u);
	assert_non_null(ev);
	j = json_tokener_parse(ev);
	assert_string_equal(json_object_get_string(json_object_object_get(j,
	    "speaker")), "S2");
	json_object_put(j);
	free(ev);
	u.speaker = 0;
	ev = proto_event_unit("abc", &u);
	assert_non_null(ev);
	j = json_tokener_parse(ev);
	assert_non_null(j);
	assert_false(json_object_object_get_ex(j, "speaker", NULL));
	assert_string_equal(json_object_get_string(json_object_object_get(j,
	    "type")), "unit");
	assert_int_equal(json_object_get_int64(json_object_object_get(j,
	    "id")), 3);
	assert_string_equal(json_object_get_string(json_object_object_get(j,
	    "text")), " Hello there.");
	assert_true(json_object_get_boolean(json_object_object_get(j,
	    "closed")));
	assert_int_equal(json_object_get_int64(json_object_object_get(j,
	    "last_final")), 9);
	json_object_put(j);
	free(ev);
	ev = proto_event_hello("sottod/x", "tiny.en");
	assert_non_null(strstr(ev, "\"units\":true"));
	free(ev);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_frame_round_trip),
		cmocka_unit_test(test_frame_truncated),
		cmocka_unit_test(test_frame_bad_header),
		cmocka_unit_test(test_hello),
		cmocka_unit_test(test_bad_json),
		cmocka_unit_test(test_json_object),
		cmocka_unit_test(test_open),
		cmocka_unit_test(test_open_bad_fields),
		cmocka_unit_test(test_subscribe_and_empty),
		cmocka_unit_test(test_events),
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_event_error_code),
		cmocka_unit_test(test_units),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
