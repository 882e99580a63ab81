/*
 * The sottod wire protocol: frame headers and the JSON payloads of
 * control messages and events. Pure functions over bytes (proto.h).
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

/*
 * Parse p as exactly one JSON object (whitespace around it allowed).
 * Returns the object (caller puts it) or NULL with msg set.
 */
static struct json_object *
proto_json_object(const uint8_t *p, size_t len, char *msg)
{
	struct json_tokener *tok;
	struct json_object *o;
	enum json_tokener_error e;
	size_t end;

	if (len == 0 || memchr(p, '\0', len) != NULL) {
		proto_fail(msg, PROTO_E_BAD_JSON, len == 0 ? "empty payload, "
		    "expected a JSON object" : "NUL byte in a JSON payload");
		return NULL;
	}
	if ((tok = json_tokener_new_ex(PROTO_JSON_DEPTH)) == NULL) {
		proto_fail(msg, PROTO_E_BAD_JSON, "out of memory");
		return NULL;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT |
	    JSON_TOKENER_VALIDATE_UTF8);
	o = json_tokener_parse_ex(tok, (const char *)p, (int)len);
	e = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	json_tokener_free(tok);
	if (o == NULL || e != json_tokener_success) {
		json_object_put(o);
		proto_fail(msg, PROTO_E_BAD_JSON, "bad JSON: %s",
		    e == json_tokener_continue ? "truncated" :
		    json_tokener_error_desc(e));
		return NULL;
	}
	while (end < len && strchr(" \t\r\n", p[end]) != NULL)
		end++;
	if (end != len || !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		proto_fail(msg, PROTO_E_BAD_JSON, end != len ? "bytes after "
		    "the JSON object" : "payload is not a JSON object");
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
	if ((o = proto_json_object(p, len, msg)) == NULL)
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
	static const char *const formats[] = { "s16le", "f32le", "opus" };
	static const char *const tasks[] = { "transcribe", "translate" };
	int64_t v = 0;
	int rc, e = 0;

	if ((rc = proto_get_enum(o, "format", formats, 3, &e, msg)) < 0)
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
	if ((rc = proto_get_bool(o, "live", &m->live, msg)) < 0)
		return rc;
	if ((rc = proto_get_bool(o, "word_timestamps", &m->word_timestamps,
	    msg)) < 0)
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
	if ((o = proto_json_object(p, len, msg)) == NULL)
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
	m->since = PROTO_SINCE_NONE;
	if ((o = proto_json_object(p, len, msg)) == NULL)
		return PROTO_E_BAD_JSON;
	rc = proto_get_str(o, "source", m->source, sizeof(m->source), msg);
	if (rc == 0)
		rc = -proto_fail(msg, PROTO_E_BAD_JSON, "SUBSCRIBE needs "
		    "\"source\"");
	if (rc > 0)
		rc = proto_get_int(o, "since", -1, INT64_MAX, &m->since, msg);
	json_object_put(o);
	return rc < 0 ? (enum proto_error)-rc : PROTO_OK;
}

enum proto_error
proto_parse_empty(const uint8_t *p, size_t len, char *msg)
{
	struct json_object *o;

	if (len == 0)
		return PROTO_OK;
	if ((o = proto_json_object(p, len, msg)) == NULL)
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
	if ((o = proto_json_object(p, len, msg)) == NULL)
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
	}
	return "?";
}

size_t
proto_format_sample_bytes(enum proto_format f)
{
	return f == PROTO_FORMAT_S16LE ? 2 : f == PROTO_FORMAT_F32LE ? 4 : 0;
}

int
proto_session_valid(const char *s)
{
	size_t n = strlen(s);

	return n > 0 && n < PROTO_SESSION_MAX && strspn(s, "abcdefghijklmnop"
	    "qrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == n;
}

/* Length of the valid UTF-8 sequence at s (n bytes left), or 0. */
static size_t
proto_utf8_len(const unsigned char *s, size_t n)
{
	size_t len, i;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	return len;
}

char *
proto_utf8_clean(const char *s)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t n = strlen((const char *)u), i = 0, k, o = 0;
	char *buf;

	if ((buf = malloc(n * 3 + 1)) == NULL)
		return NULL;
	while (i < n) {
		if ((k = proto_utf8_len(u + i, n - i)) == 0) {
			memcpy(buf + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
			continue;
		}
		memcpy(buf + o, u + i, k);
		o += k;
		i += k;
	}
	buf[o] = '\0';
	return buf;
}

/* A JSON string of s with invalid UTF-8 replaced by U+FFFD. */
static struct json_object *
proto_json_text(const char *s)
{
	struct json_object *j;
	char *buf;

	if ((buf = proto_utf8_clean(s)) == NULL)
		return NULL;
	j = json_object_new_string(buf);
	free(buf);
	return j;
}

/* Seconds with millisecond precision, printed as such. */
static struct json_object *
proto_json_seconds(double s)
{
	char buf[32];

	if (!(s > -1e9 && s < 1e9))
		s = 0;
	snprintf(buf, sizeof(buf), "%.3f", s);
	return json_object_new_double_s(s, buf);
}

static struct json_object *
proto_event_new(const char *type, const char *session)
{
	struct json_object *o;

	if ((o = json_object_new_object()) == NULL)
		return NULL;
	json_object_object_add(o, "type", json_object_new_string(type));
	if (session != NULL)
		json_object_object_add(o, "session", proto_json_text(session));
	return o;
}

/* Serialise o (consumed) into a malloc'd string. */
static char *
proto_event_done(struct json_object *o)
{
	char *s;

	if (o == NULL)
		return NULL;
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	return s;
}

char *
proto_event_hello(const char *server, const char *model)
{
	struct json_object *o = proto_event_new("hello", NULL);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "protocol",
	    json_object_new_int(SOTTO_PROTO_VERSION));
	json_object_object_add(o, "server", proto_json_text(server));
	json_object_object_add(o, "model", proto_json_text(model));
	return proto_event_done(o);
}

char *
proto_event_opened(const char *session, int64_t last_final,
    uint64_t audio_frames)
{
	struct json_object *o = proto_event_new("opened", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "last_final",
	    json_object_new_int64(last_final));
	json_object_object_add(o, "audio_frames",
	    json_object_new_int64((int64_t)audio_frames));
	return proto_event_done(o);
}

char *
proto_event_subscribed(const char *source, const char *session)
{
	struct json_object *o = proto_event_new("subscribed", session);

	if (o != NULL)
		json_object_object_add(o, "source", proto_json_text(source));
	return proto_event_done(o);
}

char *
proto_event_partial(const char *session, const char *text, double start,
    double end)
{
	struct json_object *o = proto_event_new("partial", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "text", proto_json_text(text));
	json_object_object_add(o, "start", proto_json_seconds(start));
	json_object_object_add(o, "end", proto_json_seconds(end));
	return proto_event_done(o);
}

/* A probability to 4 decimals, printed as such. */
static struct json_object *
proto_json_probability(double p)
{
	char buf[32];

	if (!(p >= 0.0 && p <= 1.0))
		p = 0;
	snprintf(buf, sizeof(buf), "%.4f", p);
	return json_object_new_double_s(p, buf);
}

char *
proto_event_language(const char *session, const char *language,
    double probability, int settled)
{
	struct json_object *o = proto_event_new("language", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "language", proto_json_text(language));
	json_object_object_add(o, "probability",
	    proto_json_probability(probability));
	json_object_object_add(o, "settled",
	    json_object_new_boolean(settled));
	return proto_event_done(o);
}

/* faster-whisper's Word fields: word, start, end, probability. */
static struct json_object *
proto_json_words(const struct proto_segment *seg)
{
	struct json_object *a = json_object_new_array(), *w;
	int i;

	for (i = 0; i < seg->n_words; i++) {
		w = json_object_new_object();
		json_object_object_add(w, "word",
		    proto_json_text(seg->words[i].word));
		json_object_object_add(w, "start",
		    proto_json_seconds(seg->words[i].start));
		json_object_object_add(w, "end",
		    proto_json_seconds(seg->words[i].end));
		json_object_object_add(w, "probability",
		    proto_json_probability(seg->words[i].probability));
		json_object_array_add(a, w);
	}
	return a;
}

char *
proto_event_final(const char *session, int64_t id,
    const struct proto_segment *segs, int n)
{
	struct json_object *o = proto_event_new("final", session), *a, *s;
	int i;

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "id", json_object_new_int64(id));
	a = json_object_new_array();
	for (i = 0; i < n; i++) {
		s = json_object_new_object();
		json_object_object_add(s, "start",
		    proto_json_seconds(segs[i].start));
		json_object_object_add(s, "end",
		    proto_json_seconds(segs[i].end));
		json_object_object_add(s, "text",
		    proto_json_text(segs[i].text));
		if (segs[i].words != NULL)
			json_object_object_add(s, "words",
			    proto_json_words(&segs[i]));
		json_object_array_add(a, s);
	}
	json_object_object_add(o, "segments", a);
	return proto_event_done(o);
}

char *
proto_event_error(enum proto_error code, const char *message)
{
	struct json_object *o = proto_event_new("error", NULL);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "code",
	    json_object_new_string(proto_error_name(code)));
	json_object_object_add(o, "message", proto_json_text(message));
	return proto_event_done(o);
}

char *
proto_event_end(const char *session, const struct proto_end *e)
{
	struct json_object *o = proto_event_new("end", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "last_final",
	    json_object_new_int64(e->last_final));
	json_object_object_add(o, "last_final_end",
	    proto_json_seconds(e->last_final_end));
	json_object_object_add(o, "audio_s", proto_json_seconds(e->audio_s));
	json_object_object_add(o, "undecoded_s",
	    proto_json_seconds(e->undecoded_s));
	return proto_event_done(o);
}

char *
proto_event_overload(const char *session, double dropped_s, double total_s)
{
	struct json_object *o = proto_event_new("overload", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "dropped_s", proto_json_seconds(dropped_s));
	json_object_object_add(o, "total_dropped_s",
	    proto_json_seconds(total_s));
	return proto_event_done(o);
}

static struct json_object *
proto_json_or_null(double v)
{
	return v < 0 ? NULL : proto_json_seconds(v);
}

static struct json_object *
proto_json_session_list(const struct proto_session_info *l, int n)
{
	struct json_object *a = json_object_new_array_ext(n), *o;
	int i;

	for (i = 0; a != NULL && i < n; i++) {
		o = json_object_new_object();
		json_object_object_add(o, "id", proto_json_text(l[i].id));
		json_object_object_add(o, "source",
		    json_object_new_string(l[i].source));
		json_object_object_add(o, "state",
		    json_object_new_string(l[i].state));
		json_object_object_add(o, "audio_s",
		    proto_json_or_null(l[i].audio_s));
		json_object_object_add(o, "lag_s",
		    proto_json_or_null(l[i].lag_s));
		json_object_object_add(o, "rtf", proto_json_or_null(l[i].rtf));
		json_object_array_add(a, o);
	}
	return a;
}

char *
proto_event_status(const struct proto_status *st)
{
	struct json_object *o = proto_event_new("status", NULL);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "sessions",
	    json_object_new_int(st->sessions));
	json_object_object_add(o, "clients", json_object_new_int(st->clients));
	json_object_object_add(o, "subscribers",
	    json_object_new_int(st->subscribers));
	json_object_object_add(o, "model", proto_json_text(st->model));
	json_object_object_add(o, "rtf", proto_json_seconds(st->rtf));
	json_object_object_add(o, "lag_s", proto_json_seconds(st->lag_s));
	json_object_object_add(o, "uptime_s",
	    proto_json_seconds(st->uptime_s));
	json_object_object_add(o, "mic", json_object_new_string(st->mic < 0 ?
	    "off" : st->mic == 0 ? "down" : "capturing"));
	json_object_object_add(o, "dropped_partials",
	    json_object_new_int64((int64_t)st->dropped_partials));
	json_object_object_add(o, "overload_s",
	    json_object_new_int64((int64_t)st->overload_s));
	json_object_object_add(o, "session_list",
	    proto_json_session_list(st->list, st->n_list));
	return proto_event_done(o);
}
