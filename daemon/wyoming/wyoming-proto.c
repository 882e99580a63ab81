/*
 * The Wyoming protocol's events: header lines and data parsed with
 * json-c, PCM samples converted, events written (wyoming-proto.h).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "wyoming-proto.h"

#define WY_JSON_DEPTH	32	/* "context" objects nest */
#define WY_PCM_BELOW_ONE	0x1.fffffep-1f	/* the float just below 1 */

static const struct {
	const char	*type;
	enum wy_kind	 kind;
} wy_kinds[] = {
	{ "describe", WY_DESCRIBE },
	{ "transcribe", WY_TRANSCRIBE },
	{ "audio-start", WY_AUDIO_START },
	{ "audio-chunk", WY_AUDIO_CHUNK },
	{ "audio-stop", WY_AUDIO_STOP },
	{ "ping", WY_PING },
	{ "select-program", WY_SELECT_PROGRAM },
};

static enum proto_error
wy_fail(char *msg, enum proto_error e, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum proto_error
wy_fail(char *msg, enum proto_error e, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, PROTO_MSG_MAX, fmt, ap);
	va_end(ap);
	return e;
}

/* p as one JSON object, or NULL with msg; what names it in messages. */
static struct json_object *
wy_json_object(const char *p, size_t len, const char *what, char *msg)
{
	struct json_object *o;
	char why[PROTO_MSG_MAX];

	if ((o = proto_json_object(p, len, WY_JSON_DEPTH, why)) == NULL)
		wy_fail(msg, PROTO_E_BAD_JSON, "%s: %s", what, why);
	return o;
}

/* A length field: absent or null is 0. Returns PROTO_OK or an error. */
static enum proto_error
wy_length(struct json_object *o, const char *key, size_t max, size_t *ret,
    char *msg)
{
	struct json_object *v;
	int64_t n;

	*ret = 0;
	if (!json_object_object_get_ex(o, key, &v) || v == NULL)
		return PROTO_OK;
	if (!json_object_is_type(v, json_type_int))
		return wy_fail(msg, PROTO_E_BAD_JSON, "\"%s\" must be an "
		    "integer", key);
	if ((n = json_object_get_int64(v)) < 0)
		return wy_fail(msg, PROTO_E_BAD_VALUE, "\"%s\" is negative",
		    key);
	if ((uint64_t)n > max)
		return wy_fail(msg, PROTO_E_TOO_LARGE, "\"%s\" %lld is over "
		    "the limit of %zu bytes (max_event_bytes)", key,
		    (long long)n, max);
	*ret = (size_t)n;
	return PROTO_OK;
}

/* The header object, or NULL with *ret_error and msg. */
static struct json_object *
wy_header_object(const char *line, size_t len, struct wy_header *h,
    enum proto_error *ret_error, char *msg)
{
	struct json_object *o, *v;
	const char *t;

	memset(h, 0, sizeof(*h));
	if ((o = wy_json_object(line, len, "header", msg)) == NULL) {
		*ret_error = PROTO_E_BAD_JSON;
		return NULL;
	}
	if (!json_object_object_get_ex(o, "type", &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    (t = json_object_get_string(v))[0] == '\0' ||
	    strlen(t) >= sizeof(h->type)) {
		*ret_error = wy_fail(msg, PROTO_E_BAD_JSON, "header: \"type\" "
		    "must be a string of 1 to %d bytes", WY_TYPE_MAX - 1);
		json_object_put(o);
		return NULL;
	}
	snprintf(h->type, sizeof(h->type), "%s", t);
	if (json_object_object_get_ex(o, "data", &v) && v != NULL &&
	    !json_object_is_type(v, json_type_object)) {
		*ret_error = wy_fail(msg, PROTO_E_BAD_JSON, "%s: \"data\" "
		    "must be an object", h->type);
		json_object_put(o);
		return NULL;
	}
	return o;
}

enum proto_error
wy_header_parse(const char *line, size_t len, size_t max,
    struct wy_header *h, char *msg)
{
	struct json_object *o;
	enum proto_error e;

	if ((o = wy_header_object(line, len, h, &e, msg)) == NULL)
		return e;
	if ((e = wy_length(o, "data_length", max, &h->data_length, msg)) ==
	    PROTO_OK)
		e = wy_length(o, "payload_length", max, &h->payload_length,
		    msg);
	json_object_put(o);
	if (e == PROTO_OK && h->data_length + h->payload_length > max)
		e = wy_fail(msg, PROTO_E_TOO_LARGE, "%s: %zu bytes of data and "
		    "payload are over the limit of %zu (max_event_bytes)",
		    h->type, h->data_length + h->payload_length, max);
	return e;
}

/* The merged data: a field of the data bytes, else the header's. */
struct wy_data {
	struct json_object	*extra, *inline_data;
};

static struct json_object *
wy_field(const struct wy_data *d, const char *key)
{
	struct json_object *v;

	if (d->extra != NULL && json_object_object_get_ex(d->extra, key, &v))
		return v;
	if (d->inline_data != NULL &&
	    json_object_object_get_ex(d->inline_data, key, &v))
		return v;
	return NULL;
}

static enum proto_error
wy_int(const struct wy_data *d, const char *type, const char *key, int lo,
    int hi, int *ret, char *msg)
{
	struct json_object *v = wy_field(d, key);
	int64_t n;

	if (v == NULL || !json_object_is_type(v, json_type_int))
		return wy_fail(msg, PROTO_E_BAD_JSON, "%s: \"%s\" must be an "
		    "integer", type, key);
	n = json_object_get_int64(v);
	if (n < lo || n > hi)
		return wy_fail(msg, PROTO_E_BAD_VALUE, "%s: \"%s\" must be %d "
		    "to %d, not %lld", type, key, lo, hi, (long long)n);
	*ret = (int)n;
	return PROTO_OK;
}

/* An optional string (null or absent: ""), at most cap - 1 bytes. */
static enum proto_error
wy_str(const struct wy_data *d, const char *type, const char *key,
    char *buf, size_t cap, int *ret_set, char *msg)
{
	struct json_object *v = wy_field(d, key);
	const char *s;

	buf[0] = '\0';
	if (v == NULL)
		return PROTO_OK;
	if (!json_object_is_type(v, json_type_string))
		return wy_fail(msg, PROTO_E_BAD_JSON, "%s: \"%s\" must be a "
		    "string", type, key);
	s = json_object_get_string(v);
	if (strlen(s) >= cap)
		return wy_fail(msg, PROTO_E_BAD_VALUE, "%s: \"%s\" is longer "
		    "than %zu bytes", type, key, cap - 1);
	snprintf(buf, cap, "%s", s);
	if (ret_set != NULL)
		*ret_set = 1;
	return PROTO_OK;
}

static enum proto_error
wy_fields(const struct wy_data *d, struct wy_event *ev, char *msg)
{
	enum proto_error e = PROTO_OK;

	switch (ev->kind) {
	case WY_AUDIO_START:
	case WY_AUDIO_CHUNK:
		if ((e = wy_int(d, ev->type, "rate", PROTO_RATE_MIN,
		    PROTO_RATE_MAX, &ev->rate, msg)) == PROTO_OK &&
		    (e = wy_int(d, ev->type, "width", 1, WY_WIDTH_MAX,
		    &ev->width, msg)) == PROTO_OK)
			e = wy_int(d, ev->type, "channels", 1,
			    PROTO_CHANNELS_MAX, &ev->channels, msg);
		break;
	case WY_TRANSCRIBE:
		if ((e = wy_str(d, ev->type, "language", ev->language,
		    sizeof(ev->language), NULL, msg)) == PROTO_OK)
			e = wy_str(d, ev->type, "name", ev->name,
			    sizeof(ev->name), NULL, msg);
		break;
	case WY_SELECT_PROGRAM:
		e = wy_str(d, ev->type, "name", ev->name, sizeof(ev->name),
		    NULL, msg);
		break;
	case WY_PING:
		e = wy_str(d, ev->type, "text", ev->text, sizeof(ev->text),
		    &ev->has_text, msg);
		break;
	default:
		break;
	}
	return e;
}

enum proto_error
wy_event_parse(const char *line, size_t len, const uint8_t *data,
    size_t data_len, struct wy_event *ev, char *msg)
{
	struct wy_data d = { NULL, NULL };
	struct wy_header h;
	struct json_object *o;
	enum proto_error e = PROTO_OK;
	size_t i;

	memset(ev, 0, sizeof(*ev));
	if ((o = wy_header_object(line, len, &h, &e, msg)) == NULL)
		return e;
	snprintf(ev->type, sizeof(ev->type), "%s", h.type);
	for (i = 0; i < sizeof(wy_kinds) / sizeof(wy_kinds[0]); i++)
		if (strcmp(h.type, wy_kinds[i].type) == 0)
			ev->kind = wy_kinds[i].kind;
	json_object_object_get_ex(o, "data", &d.inline_data);
	if (data_len > 0 && (d.extra = wy_json_object((const char *)data,
	    data_len, h.type, msg)) == NULL)
		e = PROTO_E_BAD_JSON;
	if (e == PROTO_OK)
		e = wy_fields(&d, ev, msg);
	json_object_put(d.extra);
	json_object_put(o);
	return e;
}

void
wy_pcm_float(const uint8_t *p, size_t n, int width, float *out)
{
	size_t i;
	int32_t v;

	for (i = 0; i < n; i++, p += width) {
		switch (width) {
		case 1:
			out[i] = ((int)p[0] - 128) / 128.0f;
			continue;
		case 2:
			v = (int16_t)(p[0] | p[1] << 8);
			out[i] = v / 32768.0f;
			continue;
		case 3:
			v = (int32_t)((uint32_t)p[0] << 8 |
			    (uint32_t)p[1] << 16 | (uint32_t)p[2] << 24) >> 8;
			out[i] = v / 8388608.0f;
			continue;
		default:
			v = (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
			    (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
			/*
			 * The quotient is below 1 but rounds to 1.0f from
			 * 2^31 - 64 up: keep the promise of [-1, 1).
			 */
			out[i] = fminf((float)(v / 2147483648.0),
			    WY_PCM_BELOW_ONE);
			continue;
		}
	}
}

/* The event line of type with data (consumed; NULL: none). */
static char *
wy_event_line(const char *type, struct json_object *data)
{
	struct json_object *o;
	const char *s;
	char *line = NULL;
	size_t n;

	if ((o = json_object_new_object()) == NULL) {
		json_object_put(data);
		return NULL;
	}
	json_object_object_add(o, "type", json_object_new_string(type));
	if (data != NULL)
		json_object_object_add(o, "data", data);
	json_object_object_add(o, "version",
	    json_object_new_string(WY_PROTOCOL_VERSION));
	s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE);
	if (s != NULL && (line = malloc((n = strlen(s)) + 2)) != NULL) {
		memcpy(line, s, n);
		line[n] = '\n';
		line[n + 1] = '\0';
	}
	json_object_put(o);
	return line;
}

char *
wy_write(const char *type, const char *const *kv, int n)
{
	struct json_object *data = NULL;
	int i;

	if (n > 0 && (data = json_object_new_object()) == NULL)
		return NULL;
	for (i = 0; i < n; i++)
		if (kv[2 * i + 1] != NULL)
			json_object_object_add(data, kv[2 * i],
			    proto_json_text(kv[2 * i + 1]));
	return wy_event_line(type, data);
}

static struct json_object *
wy_attribution(const char *name, const char *url)
{
	struct json_object *a = json_object_new_object();

	json_object_object_add(a, "name", json_object_new_string(name));
	json_object_object_add(a, "url", proto_json_text(url));
	return a;
}

static struct json_object *
wy_info_model(const struct wy_info *in)
{
	struct json_object *m = json_object_new_object(), *langs;
	char desc[PROTO_NAME_MAX + 16];
	int i;

	snprintf(desc, sizeof(desc), "Whisper %s", in->model);
	json_object_object_add(m, "name", proto_json_text(in->model));
	json_object_object_add(m, "description", proto_json_text(desc));
	json_object_object_add(m, "attribution", wy_attribution("OpenAI",
	    "https://github.com/openai/whisper"));
	json_object_object_add(m, "installed", json_object_new_boolean(1));
	/* Whisper's releases are versioned by name (large-v2, large-v3) */
	json_object_object_add(m, "version", proto_json_text(in->model));
	langs = json_object_new_array();
	for (i = 0; i < in->n_languages; i++)
		json_object_array_add(langs,
		    proto_json_text(in->languages[i]));
	json_object_object_add(m, "languages", langs);
	return m;
}

char *
wy_write_info(const struct wy_info *in)
{
	static const char *const others[] = { "tts", "handle", "intent",
	    "wake", "mic", "snd" };
	struct json_object *data, *asr, *prog, *models;
	size_t i;

	if ((data = json_object_new_object()) == NULL)
		return NULL;
	prog = json_object_new_object();
	json_object_object_add(prog, "name", proto_json_text(in->program));
	json_object_object_add(prog, "description", json_object_new_string(
	    "sotto: Whisper speech-to-text, streamed"));
	json_object_object_add(prog, "attribution", wy_attribution("sotto",
	    in->url));
	json_object_object_add(prog, "installed", json_object_new_boolean(1));
	json_object_object_add(prog, "version", proto_json_text(in->version));
	models = json_object_new_array();
	json_object_array_add(models, wy_info_model(in));
	json_object_object_add(prog, "models", models);
	json_object_object_add(prog, "supports_transcript_streaming",
	    json_object_new_boolean(1));
	json_object_object_add(prog, "requires_external_vad",
	    json_object_new_boolean(1));
	asr = json_object_new_array();
	json_object_array_add(asr, prog);
	json_object_object_add(data, "asr", asr);
	for (i = 0; i < sizeof(others) / sizeof(others[0]); i++)
		json_object_object_add(data, others[i],
		    json_object_new_array());
	return wy_event_line("info", data);
}
