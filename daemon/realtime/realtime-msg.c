/*
 * The Realtime API's client events, parsed (docs/http.md, "Realtime"):
 * session.update with a transcription session (audio.input.format,
 * .transcription, .turn_detection) or the beta transcription_session.
 * update (input_audio_format, input_audio_transcription, turn_detection);
 * input_audio_buffer.append (base64 audio), .commit and .clear. Fields
 * this server has no use for (noise reduction, include, logprobs) are
 * ignored, as unknown fields are everywhere in the HTTP API. Free of the
 * daemon's state, so tests/fuzz/fuzz-realtime.c can drive it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "proto.h"
#include "realtime.h"

#define RT_JSON_DEPTH	16

void
rt_config_init(struct rt_config *c, int server_vad)
{
	memset(c, 0, sizeof(*c));
	c->format = RT_FORMAT_PCM16;
	c->server_vad = server_vad;
	c->threshold = 0.5f;
	c->prefix_padding_ms = 300;
	c->silence_duration_ms = 500;
	snprintf(c->model, sizeof(c->model), "whisper-1");
}

/* The string field k of o, or NULL when absent or not a string. */
static const char *
rt_str(struct json_object *o, const char *k)
{
	struct json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, k, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

/* Field k of o when it is an object; *null set when it is null. */
static struct json_object *
rt_obj(struct json_object *o, const char *k, int *null)
{
	struct json_object *v;

	if (null != NULL)
		*null = 0;
	if (o == NULL || !json_object_object_get_ex(o, k, &v))
		return NULL;
	if (v == NULL) {
		if (null != NULL)
			*null = 1;
		return NULL;
	}
	return json_object_is_type(v, json_type_object) ? v : NULL;
}

/* A format's name, current ("audio/pcm") or beta ("pcm16"). */
static int
rt_format_name(const char *s, enum rt_format *ret)
{
	if (strcmp(s, "audio/pcm") == 0 || strcmp(s, "pcm16") == 0)
		*ret = RT_FORMAT_PCM16;
	else if (strcmp(s, "audio/pcmu") == 0 || strcmp(s, "g711_ulaw") == 0)
		*ret = RT_FORMAT_PCMU;
	else if (strcmp(s, "audio/pcma") == 0 || strcmp(s, "g711_alaw") == 0)
		*ret = RT_FORMAT_PCMA;
	else
		return -1;
	return 0;
}

/* The current shape's format object: {"type": "audio/pcm", "rate"}. */
static int
rt_format_object(struct json_object *f, struct rt_config *c, char *msg)
{
	struct json_object *rate;
	const char *t = rt_str(f, "type");

	if (t == NULL || strncmp(t, "audio/", 6) != 0 ||
	    rt_format_name(t, &c->format) != 0) {
		snprintf(msg, RT_MSG_MAX, "audio.input.format.type must be "
		    "audio/pcm, audio/pcmu or audio/pcma");
		return -1;
	}
	if (json_object_object_get_ex(f, "rate", &rate) && rate != NULL &&
	    c->format == RT_FORMAT_PCM16 && json_object_get_int(rate) !=
	    24000) {
		snprintf(msg, RT_MSG_MAX, "audio/pcm is 24000 Hz only");
		return -1;
	}
	return 0;
}

/* A number field k of o into *ret, within [lo, hi]; absent: unchanged. */
static int
rt_number(struct json_object *o, const char *k, double lo, double hi,
    double *ret, char *msg)
{
	struct json_object *v;
	double d;

	if (!json_object_object_get_ex(o, k, &v) || v == NULL)
		return 0;
	if (!json_object_is_type(v, json_type_int) &&
	    !json_object_is_type(v, json_type_double)) {
		snprintf(msg, RT_MSG_MAX, "turn_detection.%s must be a number",
		    k);
		return -1;
	}
	d = json_object_get_double(v);
	if (!(d >= lo && d <= hi)) {
		snprintf(msg, RT_MSG_MAX, "turn_detection.%s must be from %g "
		    "to %g", k, lo, hi);
		return -1;
	}
	*ret = d;
	return 0;
}

/* turn_detection: server_vad with its numbers, or null. */
static int
rt_turn(struct json_object *s, struct rt_config *c, char *msg)
{
	struct json_object *td;
	const char *t;
	double th = c->threshold, pad = c->prefix_padding_ms,
	    sil = c->silence_duration_ms;
	int null;

	td = rt_obj(s, "turn_detection", &null);
	if (null) {
		c->server_vad = 0;
		return 0;
	}
	if (td == NULL)
		return 0;
	if ((t = rt_str(td, "type")) != NULL && strcmp(t, "server_vad") != 0) {
		snprintf(msg, RT_MSG_MAX, "turn_detection.type '%.32s': only "
		    "server_vad (or turn_detection null, the client commits)",
		    t);
		return -1;
	}
	if (rt_number(td, "threshold", 0, 1, &th, msg) != 0 ||
	    rt_number(td, "prefix_padding_ms", 0, 10000, &pad, msg) != 0 ||
	    rt_number(td, "silence_duration_ms", 0, 10000, &sil, msg) != 0)
		return -1;
	c->server_vad = 1;
	c->threshold = (float)th;
	c->prefix_padding_ms = (int)pad;
	c->silence_duration_ms = (int)sil;
	return 0;
}

/*
 * The transcription object: its model (echoed; gpt-4o-transcribe-diarize
 * asks for speaker labels), language and prompt (the stream's vocabulary,
 * as the socket's OPEN prompt).
 */
static int
rt_transcription(struct json_object *t, struct rt_config *c, char *msg)
{
	const char *v;

	if (t == NULL)
		return 0;
	if ((v = rt_str(t, "model")) != NULL) {
		snprintf(c->model, sizeof(c->model), "%s", v);
		/* OpenAI's model with speaker labels */
		c->diarize = strcmp(v, "gpt-4o-transcribe-diarize") == 0;
	}
	if ((v = rt_str(t, "language")) != NULL) {
		if (strlen(v) >= sizeof(c->language)) {
			snprintf(msg, RT_MSG_MAX, "transcription.language "
			    "'%.32s' is not a language code", v);
			return -1;
		}
		snprintf(c->language, sizeof(c->language), "%s", v);
	}
	if ((v = rt_str(t, "prompt")) != NULL) {
		if (strlen(v) >= sizeof(c->prompt)) {
			snprintf(msg, RT_MSG_MAX, "transcription.prompt is "
			    "longer than %zu bytes", sizeof(c->prompt) - 1);
			return -1;
		}
		snprintf(c->prompt, sizeof(c->prompt), "%s", v);
	}
	return 0;
}

/* session.update's session: {"type": "transcription", "audio": ...}. */
static int
rt_session(struct json_object *s, struct rt_config *c, char *msg)
{
	struct json_object *in, *f;
	const char *t = rt_str(s, "type");

	if (t != NULL && strcmp(t, "transcription") != 0) {
		snprintf(msg, RT_MSG_MAX, "session.type '%.32s': this server "
		    "has transcription sessions only (connect with "
		    "?intent=transcription)", t);
		return -1;
	}
	in = rt_obj(rt_obj(s, "audio", NULL), "input", NULL);
	if (in == NULL)
		return 0;
	if ((f = rt_obj(in, "format", NULL)) != NULL &&
	    rt_format_object(f, c, msg) != 0)
		return -1;
	if (rt_transcription(rt_obj(in, "transcription", NULL), c, msg) != 0)
		return -1;
	return rt_turn(in, c, msg);
}

/* The beta transcription_session.update's session. */
static int
rt_session_beta(struct json_object *s, struct rt_config *c, char *msg)
{
	const char *f = rt_str(s, "input_audio_format");

	c->beta = 1;
	if (f != NULL && (strncmp(f, "audio/", 6) == 0 ||
	    rt_format_name(f, &c->format) != 0)) {
		snprintf(msg, RT_MSG_MAX, "input_audio_format '%.32s' must be "
		    "pcm16, g711_ulaw or g711_alaw", f);
		return -1;
	}
	if (rt_transcription(rt_obj(s, "input_audio_transcription", NULL), c,
	    msg) != 0)
		return -1;
	return rt_turn(s, c, msg);
}

static int
rt_append(struct json_object *o, struct rt_msg *m, char *msg)
{
	struct json_object *v;
	const char *a;
	size_t len;
	long n;

	if (!json_object_object_get_ex(o, "audio", &v) ||
	    !json_object_is_type(v, json_type_string)) {
		snprintf(msg, RT_MSG_MAX, "input_audio_buffer.append needs "
		    "\"audio\", a base64 string");
		return -1;
	}
	a = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	if ((m->audio = malloc(len / 4 * 3 + 3)) == NULL) {
		snprintf(msg, RT_MSG_MAX, "out of memory");
		return -1;
	}
	if ((n = rt_base64_decode(a, len, m->audio)) < 0) {
		free(m->audio);
		m->audio = NULL;
		snprintf(msg, RT_MSG_MAX, "audio is not base64");
		return -1;
	}
	m->n_audio = (size_t)n;
	return 0;
}

/* The event's body by its type, into m. */
static int
rt_msg_body(struct json_object *o, const char *type, struct rt_msg *m,
    const char **code, char *msg)
{
	struct json_object *s;

	*code = "invalid_value";
	if (strcmp(type, "input_audio_buffer.append") == 0) {
		m->type = RT_MSG_APPEND;
		return rt_append(o, m, msg);
	}
	if (strcmp(type, "input_audio_buffer.commit") == 0) {
		m->type = RT_MSG_COMMIT;
		return 0;
	}
	if (strcmp(type, "input_audio_buffer.clear") == 0) {
		m->type = RT_MSG_CLEAR;
		return 0;
	}
	m->type = RT_MSG_UPDATE;
	s = rt_obj(o, "session", NULL);
	if (strcmp(type, "session.update") == 0)
		return rt_session(s, &m->cfg, msg);
	if (strcmp(type, "transcription_session.update") == 0)
		return rt_session_beta(s, &m->cfg, msg);
	*code = "invalid_event";
	snprintf(msg, RT_MSG_MAX, "event type '%.48s' is not one of a "
	    "transcription session (session.update, transcription_session."
	    "update, input_audio_buffer.append, .commit, .clear)", type);
	return -1;
}

int
rt_msg_parse(const uint8_t *buf, size_t len, const struct rt_config *cur,
    struct rt_msg *m, const char **code, char *msg)
{
	struct json_object *o;
	const char *type, *id;
	char why[PROTO_MSG_MAX];
	int rc;

	memset(m, 0, sizeof(*m));
	m->cfg = *cur;
	*code = "invalid_json";
	if ((o = proto_json_object(buf, len, RT_JSON_DEPTH, why)) == NULL) {
		snprintf(msg, RT_MSG_MAX, "an event must be one JSON object "
		    "(%.*s)", RT_MSG_MAX / 2, why);
		return -1;
	}
	if ((id = rt_str(o, "event_id")) != NULL)
		snprintf(m->event_id, sizeof(m->event_id), "%s", id);
	if ((type = rt_str(o, "type")) == NULL) {
		*code = "invalid_event";
		snprintf(msg, RT_MSG_MAX, "an event needs a \"type\" string");
		rc = -1;
	} else
		rc = rt_msg_body(o, type, m, code, msg);
	json_object_put(o);
	return rc;
}
