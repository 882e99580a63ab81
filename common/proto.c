/*
 * The sottod wire protocol: frame headers and the JSON payloads of
 * control messages, parsed. Pure functions over bytes (proto.h); the
 * events sottod sends are built in proto-event.c.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "proto.h"

#define PROTO_JSON_DEPTH	8

static const char *const proto_error_names[] = {
	[PROTO_OK] = "ok",
	[PROTO_E_BAD_FRAME] = "bad_frame",
	[PROTO_E_TOO_LARGE] = "too_large",
	[PROTO_E_BAD_JSON] = "bad_json",
	[PROTO_E_BAD_VALUE] = "bad_value",
	[PROTO_E_BAD_ORDER] = "bad_order",
	[PROTO_E_VERSION] = "version",
	[PROTO_E_BUSY] = "busy",
	[PROTO_E_NO_SESSION] = "no_session",
	[PROTO_E_UNAVAILABLE] = "unavailable",
	[PROTO_E_OVERLOAD] = "overload",
	[PROTO_E_SLOW_READER] = "slow_reader",
	[PROTO_E_INTERNAL] = "internal",
	[PROTO_E_SHUTDOWN] = "shutdown",
	[PROTO_E_TOO_MANY] = "too_many_connections",
	[PROTO_E_TIMEOUT] = "timeout",
	[PROTO_E_TOO_FAST] = "too_fast",
};

static enum proto_error
proto_fail(char *msg, enum proto_error e, const char *fmt, ...)
{
	va_list ap;

	if (msg != NULL) {
		va_start(ap, fmt);
		vsnprintf(msg, PROTO_MSG_MAX, fmt, ap);
		va_end(ap);
	}
	return e;
}

const char *
proto_error_name(enum proto_error e)
{
	if ((size_t)e >= sizeof(proto_error_names) /
	    sizeof(proto_error_names[0]))
		return "internal";
	return proto_error_names[e];
}

enum proto_error
proto_event_error_code(const char *json)
{
	static const char prefix[] = "{\"type\":\"error\",\"code\":\"";
	size_t e, n;

	if (strncmp(json, prefix, sizeof(prefix) - 1) != 0)
		return PROTO_OK;
	json += sizeof(prefix) - 1;
	for (e = PROTO_E_BAD_FRAME; e < sizeof(proto_error_names) /
	    sizeof(proto_error_names[0]); e++) {
		n = strlen(proto_error_names[e]);
		if (strncmp(json, proto_error_names[e], n) == 0 && json[n] == '"')
			return (enum proto_error)e;
	}
	return PROTO_E_INTERNAL;
}

int
proto_type_known(uint8_t type)
{
	return (type >= MSG_HELLO && type <= MSG_STATUS) || type == MSG_EVENT;
}

const char *
proto_type_name(uint8_t type)
{
	static const char *const names[] = { "?", "HELLO", "OPEN",
	    "SUBSCRIBE", "AUDIO", "END", "STATUS" };

	if (type == MSG_EVENT)
		return "EVENT";
	return type <= MSG_STATUS ? names[type] : "?";
}

int
proto_frame_parse(const uint8_t *buf, size_t len, size_t max_payload,
    struct proto_frame *ret, size_t *ret_used, enum proto_error *ret_error,
    char *msg)
{
	uint32_t l;

	if (len < PROTO_HEADER_BYTES)
		return 0;
	l = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 |
	    (uint32_t)buf[2] << 16 | (uint32_t)buf[3] << 24;
	if (l == 0) {
		*ret_error = proto_fail(msg, PROTO_E_BAD_FRAME,
		    "frame length 0 (it must count the type byte)");
		return -1;
	}
	if ((size_t)l - 1 > max_payload) {
		*ret_error = proto_fail(msg, PROTO_E_TOO_LARGE, "%s frame of "
		    "%lu bytes is over the limit of %zu", proto_type_name(
		    buf[4]), (unsigned long)l - 1, max_payload);
		return -1;
	}
	if (!proto_type_known(buf[4])) {
		*ret_error = proto_fail(msg, PROTO_E_BAD_FRAME,
		    "unknown frame type 0x%02x", buf[4]);
		return -1;
	}
	if (len - 4 < (size_t)l)
		return 0;
	ret->type = buf[4];
	ret->payload = buf + PROTO_HEADER_BYTES;
	ret->len = (size_t)l - 1;
	*ret_used = 4 + (size_t)l;
	return 1;
}

void
proto_frame_header(uint8_t *hdr, uint8_t type, size_t payload_len)
{
	uint32_t l = (uint32_t)payload_len + 1;

	hdr[0] = l & 0xff;
	hdr[1] = (l >> 8) & 0xff;
	hdr[2] = (l >> 16) & 0xff;
	hdr[3] = (l >> 24) & 0xff;
	hdr[4] = type;
}

struct json_object *
proto_json_object(const void *p, size_t len, int depth, char *why)
{
	const char *c = p;
	struct json_tokener *tok;
	struct json_object *o;
	enum json_tokener_error e;
	size_t end;

	if (len == 0 || len > INT32_MAX || memchr(p, '\0', len) != NULL) {
		proto_fail(why, PROTO_E_BAD_JSON, "%s", len == 0 ? "empty, "
		    "expected a JSON object" : len > INT32_MAX ? "too long" :
		    "a NUL byte in the JSON");
		return NULL;
	}
	if ((tok = json_tokener_new_ex(depth)) == NULL) {
		proto_fail(why, PROTO_E_INTERNAL, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
	    JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, c, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (o == NULL || e != json_tokener_success) {
		json_object_put(o);
		proto_fail(why, PROTO_E_BAD_JSON, "bad JSON: %s",
		    e == json_tokener_continue ? "truncated" :
		    json_tokener_error_desc(e));
		return NULL;
	}
	while (end < len && strchr(" \t\r\n", c[end]) != NULL)
		end++;
	if (end != len || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		proto_fail(why, PROTO_E_BAD_JSON, "%s", end != len ?
		    "bytes after the JSON object" : "not a JSON object");
		return NULL;
	}
	return o;
}

/* Integer field: 0 absent, 1 found, or an error code as a negative. */
static int
proto_get_int(struct json_object *o, const char *key, int64_t lo,
    int64_t hi, int64_t *ret, char *msg)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_int))
		return -proto_fail(msg, PROTO_E_BAD_JSON, "\"%s\" must be an "
		    "integer", key);
	*ret = json_object_get_int64(v);
	if (*ret < lo || *ret > hi)
		return -proto_fail(msg, PROTO_E_BAD_VALUE, "\"%s\" must be "
		    "%lld to %lld, not %lld", key, (long long)lo,
		    (long long)hi, (long long)*ret);
	return 1;
}

/* String field copied into buf (size len); same returns as above. */
static int
proto_get_str(struct json_object *o, const char *key, char *buf,
    size_t len, char *msg)
{
	struct json_object *v;
	const char *s;
	size_t n;

	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_string))
		return -proto_fail(msg, PROTO_E_BAD_JSON, "\"%s\" must be a "
		    "string", key);
	s = json_object_get_string(v);
	n = (size_t)json_object_get_string_len(v);
	if (n >= len || strlen(s) != n)
		return -proto_fail(msg, PROTO_E_BAD_VALUE, "\"%s\" is too long "
		    "or holds a NUL (at most %zu bytes)", key, len - 1);
	memcpy(buf, s, n + 1);
	return 1;
}

/* Boolean field as 0 or 1 in *ret; same returns as above. */
static int
proto_get_bool(struct json_object *o, const char *key, int *ret, char *msg)
{
	struct json_object *v;

	if (!json_object_object_get_ex(o, key, &v))
		return 0;
	if (!json_object_is_type(v, json_type_boolean))
		return -proto_fail(msg, PROTO_E_BAD_JSON, "\"%s\" must be true "
		    "or false", key);
	*ret = json_object_get_boolean(v) ? 1 : 0;
	return 1;
}

/* Map a string field onto one of names[]; same returns as above. */
static int
proto_get_enum(struct json_object *o, const char *key,
    const char *const *names, int n, int *ret, char *msg)
{
	char buf[PROTO_NAME_MAX] = "";
	int i, rc;

	if ((rc = proto_get_str(o, key, buf, sizeof(buf), msg)) <= 0)
		return rc;
	for (i = 0; i < n; i++)
		if (strcmp(buf, names[i]) == 0) {
			*ret = i;
			return 1;
		}
	return -proto_fail(msg, PROTO_E_BAD_VALUE, "unknown \"%s\" value "
	    "'%s'", key, buf);
}

enum proto_error
proto_parse_hello(const uint8_t *p, size_t len, struct msg_hello *m,
    char *msg)
{
	struct json_object *o;
	int64_t v = 0;
	int rc;

	memset(m, 0, sizeof(*m));
	if ((o = proto_json_object(p, len, PROTO_JSON_DEPTH, msg)) == NULL)
		return PROTO_E_BAD_JSON;
	rc = proto_get_int(o, "protocol", 0, INT32_MAX, &v, msg);
	if (rc == 0)
		rc = -proto_fail(msg, PROTO_E_BAD_JSON, "HELLO needs "
		    "\"protocol\"");
	if (rc > 0)
		rc = proto_get_str(o, "client", m->client, sizeof(m->client),
		    msg);
	json_object_put(o);
	m->protocol = (int)v;
	return rc < 0 ? (enum proto_error)-rc : PROTO_OK;
}

static int
proto_open_fields(struct json_object *o, struct msg_open *m, char *msg)
{
	/* in enum proto_format's order */
	static const char *const formats[] = { "s16le", "f32le", "opus",
	    "mulaw", "alaw" };
	static const char *const tasks[] = { "transcribe", "translate" };
	int64_t v = 0;
	int rc, e = 0;

	if ((rc = proto_get_enum(o, "format", formats, 5, &e, msg)) < 0)
		return rc;
	m->format = rc ? (enum proto_format)e : PROTO_FORMAT_S16LE;
	if ((rc = proto_get_int(o, "rate", PROTO_RATE_MIN, PROTO_RATE_MAX, &v,
	    msg)) < 0)
		return rc;
	m->rate = rc ? (int)v : 16000;
	if ((rc = proto_get_int(o, "channels", 1, PROTO_CHANNELS_MAX, &v,
	    msg)) < 0)
		return rc;
	m->channels = rc ? (int)v : 1;
	if ((rc = proto_get_enum(o, "task", tasks, 2, &e, msg)) < 0)
		return rc;
	m->task = rc ? (enum proto_task)e : PROTO_TASK_TRANSCRIBE;
	if ((rc = proto_get_str(o, "language", m->language,
	    sizeof(m->language), msg)) < 0)
		return rc;
	if ((rc = proto_get_str(o, "session", m->session, sizeof(m->session),
	    msg)) < 0)
		return rc;
	if (rc > 0 && !proto_session_valid(m->session))
		return -proto_fail(msg, PROTO_E_BAD_VALUE, "bad session id");
	if ((rc = proto_get_int(o, "since", -1, INT64_MAX, &m->since,
	    msg)) < 0)
		return rc;
	if ((rc = proto_get_int(o, "since_unit", -1, INT64_MAX,
	    &m->since_unit, msg)) < 0)
		return rc;
	if ((rc = proto_get_bool(o, "live", &m->live, msg)) < 0)
		return rc;
	if ((rc = proto_get_bool(o, "word_timestamps", &m->word_timestamps,
	    msg)) < 0)
		return rc;
	if ((rc = proto_get_str(o, "prompt", m->prompt, sizeof(m->prompt),
	    msg)) < 0)
		return rc;
	if ((rc = proto_get_bool(o, "diarize", &m->diarize, msg)) < 0)
		return rc;
	return 0;
}

enum proto_error
proto_parse_open(const uint8_t *p, size_t len, struct msg_open *m,
    char *msg)
{
	struct json_object *o;
	int rc;

	memset(m, 0, sizeof(*m));
	m->since = -1;
	m->since_unit = PROTO_SINCE_NONE;
	if ((o = proto_json_object(p, len, PROTO_JSON_DEPTH, msg)) == NULL)
		return PROTO_E_BAD_JSON;
	rc = proto_open_fields(o, m, msg);
	json_object_put(o);
	if (rc == 0 && m->format == PROTO_FORMAT_OPUS && m->channels > 2)
		rc = -proto_fail(msg, PROTO_E_BAD_VALUE, "opus streams have "
		    "1 or 2 channels");
	return rc < 0 ? (enum proto_error)-rc : PROTO_OK;
}

enum proto_error
proto_parse_subscribe(const uint8_t *p, size_t len, struct msg_subscribe *m,
    char *msg)
{
	struct json_object *o;
	int rc;

	memset(m, 0, sizeof(*m));
	m->since = m->since_unit = PROTO_SINCE_NONE;
	if ((o = proto_json_object(p, len, PROTO_JSON_DEPTH, msg)) == NULL)
		return PROTO_E_BAD_JSON;
	rc = proto_get_str(o, "source", m->source, sizeof(m->source), msg);
	if (rc == 0)
		rc = -proto_fail(msg, PROTO_E_BAD_JSON, "SUBSCRIBE needs "
		    "\"source\"");
	if (rc > 0)
		rc = proto_get_int(o, "since", -1, INT64_MAX, &m->since, msg);
	if (rc >= 0)
		rc = proto_get_int(o, "since_unit", -1, INT64_MAX,
		    &m->since_unit, msg);
	json_object_put(o);
	return rc < 0 ? (enum proto_error)-rc : PROTO_OK;
}

enum proto_error
proto_parse_empty(const uint8_t *p, size_t len, char *msg)
{
	struct json_object *o;

	if (len == 0)
		return PROTO_OK;
	if ((o = proto_json_object(p, len, PROTO_JSON_DEPTH, msg)) == NULL)
		return PROTO_E_BAD_JSON;
	json_object_put(o);
	return PROTO_OK;
}

enum proto_error
proto_parse_event(const uint8_t *p, size_t len, char *ret_type, char *msg)
{
	struct json_object *o;
	int rc;

	ret_type[0] = '\0';
	if ((o = proto_json_object(p, len, PROTO_JSON_DEPTH, msg)) == NULL)
		return PROTO_E_BAD_JSON;
	rc = proto_get_str(o, "type", ret_type, PROTO_NAME_MAX, msg);
	if (rc == 0)
		rc = -proto_fail(msg, PROTO_E_BAD_JSON, "event without "
		    "\"type\"");
	json_object_put(o);
	return rc < 0 ? (enum proto_error)-rc : PROTO_OK;
}

const char *
proto_format_name(enum proto_format f)
{
	switch (f) {
	case PROTO_FORMAT_S16LE:
		return "s16le";
	case PROTO_FORMAT_F32LE:
		return "f32le";
	case PROTO_FORMAT_OPUS:
		return "opus";
	case PROTO_FORMAT_MULAW:
		return "mulaw";
	case PROTO_FORMAT_ALAW:
		return "alaw";
	}
	return "?";
}

size_t
proto_format_sample_bytes(enum proto_format f)
{
	switch (f) {
	case PROTO_FORMAT_S16LE:
		return 2;
	case PROTO_FORMAT_F32LE:
		return 4;
	case PROTO_FORMAT_MULAW:
	case PROTO_FORMAT_ALAW:
		return 1;
	case PROTO_FORMAT_OPUS:
		break;
	}
	return 0;
}

int
proto_session_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < PROTO_SESSION_MAX && strspn(s, "abcdefghijklmnop"
	    "qrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}
