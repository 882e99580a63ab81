/*
 * The Realtime door's server events as JSON text messages, in the
 * current shape or, once the client spoke the beta one, with the beta
 * names (transcription_session.created and .updated, the session's
 * input_audio_format). Every event gets an event_id of its own.
 */
#include <stdio.h>
#include <string.h>

#include "realtime-private.h"

static const char *const rt_formats[][2] = {
	[RT_FORMAT_PCM16] = { "audio/pcm", "pcm16" },
	[RT_FORMAT_PCMU] = { "audio/pcmu", "g711_ulaw" },
	[RT_FORMAT_PCMA] = { "audio/pcma", "g711_alaw" },
};

struct json_object *
rt_event(const char *type)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

/* Send o (and put it), unless the connection is closing. */
void
rt_send(struct rt_conn *c, struct json_object *o)
{
	char id[RT_ID_MAX];
	const char *s;

	if (o == NULL)
		return;
	snprintf(id, sizeof(id), "event_%llu_%llu",
	    (unsigned long long)c->ws.peer->id,
	    (unsigned long long)++c->n_events);
	json_object_object_add(o, "event_id", json_object_new_string(id));
	if (!(c->ws.peer->flags & PEER_DEAD)) {
		s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
		    JSON_C_TO_STRING_NOSLASHESCAPE);
		(void)ws_conn_send_text(c->ws.conn, s, strlen(s));
	}
	json_object_put(o);
}

static struct json_object *
rt_turn_object(const struct rt_config *cfg)
{
	struct json_object *t;

	if (!cfg->server_vad)
		return NULL;
	t = json_object_new_object();
	json_object_object_add(t, "type", json_object_new_string("server_vad"));
	json_object_object_add(t, "threshold",
	    json_object_new_double(cfg->threshold));
	json_object_object_add(t, "prefix_padding_ms",
	    json_object_new_int(cfg->prefix_padding_ms));
	json_object_object_add(t, "silence_duration_ms",
	    json_object_new_int(cfg->silence_duration_ms));
	return t;
}

static struct json_object *
rt_transcription_object(const struct rt_config *cfg)
{
	struct json_object *t = json_object_new_object();

	json_object_object_add(t, "model", json_object_new_string(cfg->model));
	json_object_object_add(t, "language", cfg->language[0] != '\0' ?
	    json_object_new_string(cfg->language) : NULL);
	json_object_object_add(t, "prompt", json_object_new_string(cfg->prompt));
	return t;
}

/* The current shape: {"type": "transcription", "audio": {"input": ...}}. */
static void
rt_session_current(struct json_object *s, const struct rt_config *cfg)
{
	struct json_object *audio = json_object_new_object(),
	    *in = json_object_new_object(), *f = json_object_new_object();

	json_object_object_add(s, "type",
	    json_object_new_string("transcription"));
	json_object_object_add(f, "type",
	    json_object_new_string(rt_formats[cfg->format][0]));
	if (cfg->format == RT_FORMAT_PCM16)
		json_object_object_add(f, "rate", json_object_new_int(24000));
	json_object_object_add(in, "format", f);
	json_object_object_add(in, "transcription",
	    rt_transcription_object(cfg));
	json_object_object_add(in, "turn_detection", rt_turn_object(cfg));
	json_object_object_add(in, "noise_reduction", NULL);
	json_object_object_add(audio, "input", in);
	json_object_object_add(s, "audio", audio);
	json_object_object_add(s, "include", json_object_new_array());
}

static void
rt_session_beta(struct json_object *s, const struct rt_config *cfg)
{
	struct json_object *m = json_object_new_array();

	json_object_array_add(m, json_object_new_string("text"));
	json_object_object_add(s, "modalities", m);
	json_object_object_add(s, "input_audio_format",
	    json_object_new_string(rt_formats[cfg->format][1]));
	json_object_object_add(s, "input_audio_transcription",
	    rt_transcription_object(cfg));
	json_object_object_add(s, "turn_detection", rt_turn_object(cfg));
	json_object_object_add(s, "input_audio_noise_reduction", NULL);
}

/* session.created / .updated, or the beta transcription_session.*. */
void
rt_send_session(struct rt_conn *c, int updated)
{
	struct json_object *o, *s = json_object_new_object();
	char type[48];

	snprintf(type, sizeof(type), "%s.%s", c->cfg.beta ?
	    "transcription_session" : "session", updated ? "updated" :
	    "created");
	o = rt_event(type);
	json_object_object_add(s, "id", json_object_new_string(c->id));
	json_object_object_add(s, "object",
	    json_object_new_string("realtime.transcription_session"));
	if (c->cfg.beta)
		rt_session_beta(s, &c->cfg);
	else
		rt_session_current(s, &c->cfg);
	json_object_object_add(o, "session", s);
	rt_send(c, o);
}

/* An error event: {"error": {type, code, message, param, event_id}}. */
void
rt_send_error(struct rt_conn *c, const char *type, const char *code,
    const char *client_event_id, const char *msg)
{
	struct json_object *o = rt_event("error"), *e = json_object_new_object();

	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "param", NULL);
	json_object_object_add(e, "event_id", client_event_id != NULL &&
	    client_event_id[0] != '\0' ?
	    json_object_new_string(client_event_id) : NULL);
	json_object_object_add(o, "error", e);
	rt_send(c, o);
}

/* An event about an item, with one more field (key NULL: none). */
void
rt_send_item(struct rt_conn *c, const char *type, const char *item_id,
    const char *key, struct json_object *val)
{
	struct json_object *o = rt_event(type);

	json_object_object_add(o, "item_id", json_object_new_string(item_id));
	if (key != NULL)
		json_object_object_add(o, key, val);
	rt_send(c, o);
}

/* input_audio_buffer.committed, then conversation.item.created. */
void
rt_send_committed(struct rt_conn *c, const struct rt_item *it)
{
	struct json_object *o = rt_event("input_audio_buffer.committed"),
	    *item, *content, *part;
	struct json_object *prev = c->last_item[0] != '\0' ?
	    json_object_new_string(c->last_item) : NULL;

	json_object_object_add(o, "previous_item_id", prev);
	json_object_object_add(o, "item_id", json_object_new_string(it->id));
	rt_send(c, o);

	o = rt_event("conversation.item.created");
	json_object_object_add(o, "previous_item_id", c->last_item[0] != '\0' ?
	    json_object_new_string(c->last_item) : NULL);
	item = json_object_new_object();
	json_object_object_add(item, "id", json_object_new_string(it->id));
	json_object_object_add(item, "object",
	    json_object_new_string("realtime.item"));
	json_object_object_add(item, "type", json_object_new_string("message"));
	json_object_object_add(item, "status",
	    json_object_new_string("completed"));
	json_object_object_add(item, "role", json_object_new_string("user"));
	part = json_object_new_object();
	json_object_object_add(part, "type",
	    json_object_new_string("input_audio"));
	json_object_object_add(part, "transcript", NULL);
	content = json_object_new_array();
	json_object_array_add(content, part);
	json_object_object_add(item, "content", content);
	json_object_object_add(o, "item", item);
	rt_send(c, o);
	snprintf(c->last_item, sizeof(c->last_item), "%s", it->id);
}

/* The item's transcript, its white space trimmed, and its seconds. */
void
rt_send_completed(struct rt_conn *c, const struct rt_item *it)
{
	struct json_object *o =
	    rt_event("conversation.item.input_audio_transcription.completed"),
	    *u = json_object_new_object();
	const char *t = it->text != NULL ? it->text : "";
	size_t n;

	while (*t == ' ' || *t == '\n' || *t == '\t')
		t++;
	for (n = strlen(t); n > 0 && (t[n - 1] == ' ' || t[n - 1] == '\n' ||
	    t[n - 1] == '\t'); n--)
		;
	json_object_object_add(o, "item_id", json_object_new_string(it->id));
	json_object_object_add(o, "content_index", json_object_new_int(0));
	json_object_object_add(o, "transcript",
	    json_object_new_string_len(t, (int)n));
	json_object_object_add(u, "type", json_object_new_string("duration"));
	json_object_object_add(u, "seconds", json_object_new_double(
	    (double)it->samples / SOTTO_SAMPLE_RATE));
	json_object_object_add(o, "usage", u);
	rt_send(c, o);
}
