/*
 * The sottod wire protocol, its events: each builder returns the JSON
 * text of one event as a malloc'd string (the caller frees it), with
 * every text field made valid UTF-8 and times printed to the
 * millisecond. The frames and the parsing of control messages are in
 * proto.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "proto.h"

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

struct json_object *
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
	/* a client prints caption units only from a server that sends them */
	json_object_object_add(o, "units", json_object_new_boolean(1));
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
    double end, double lag)
{
	struct json_object *o = proto_event_new("partial", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "text", proto_json_text(text));
	json_object_object_add(o, "start", proto_json_seconds(start));
	json_object_object_add(o, "end", proto_json_seconds(end));
	json_object_object_add(o, "lag", proto_json_seconds(lag));
	return proto_event_done(o);
}

/*
 * A caption unit (common/caption.h), open or closed: committed text,
 * tentative text, the finals it holds.
 */
/* "S1", "S2", ...: the labels of sotto transcribe --diarize's json. */
static struct json_object *
proto_json_speaker(int speaker)
{
	char s[16];

	snprintf(s, sizeof(s), "S%d", speaker);
	return json_object_new_string(s);
}

char *
proto_event_unit(const char *session, const struct proto_unit *u)
{
	struct json_object *o = proto_event_new("unit", session);

	if (o == NULL)
		return NULL;
	json_object_object_add(o, "id", json_object_new_int64(u->id));
	json_object_object_add(o, "start", proto_json_seconds(u->start));
	json_object_object_add(o, "end", proto_json_seconds(u->end));
	json_object_object_add(o, "text", proto_json_text(u->text));
	json_object_object_add(o, "tentative", proto_json_text(u->tentative));
	json_object_object_add(o, "closed", json_object_new_boolean(
	    u->closed));
	json_object_object_add(o, "first_final",
	    json_object_new_int64(u->first_final));
	json_object_object_add(o, "last_final",
	    json_object_new_int64(u->last_final));
	if (u->speaker > 0)
		json_object_object_add(o, "speaker",
		    proto_json_speaker(u->speaker));
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
    const struct proto_segment *segs, int n, double lag)
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
		if (segs[i].speaker > 0)
			json_object_object_add(s, "speaker",
			    proto_json_speaker(segs[i].speaker));
		if (segs[i].words != NULL)
			json_object_object_add(s, "words",
			    proto_json_words(&segs[i]));
		json_object_array_add(a, s);
	}
	json_object_object_add(o, "segments", a);
	json_object_object_add(o, "lag", proto_json_seconds(lag));
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
	json_object_object_add(o, "compute", proto_json_text(st->compute));
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
