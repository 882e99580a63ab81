/*
 * What an item's session says, as Realtime events: each final's text is
 * the item's next transcription delta (a final is never revised, so the
 * deltas only append; partials are not sent), the session's end is the
 * item's completed transcript (its finals joined) and the next item's
 * turn, an error its failed event and the error. With the diarizing
 * model each final segment is also OpenAI's segment event, with its
 * speaker ("A", "B", ... as diarized_json's; the session's S1, S2, ...).
 */
#include <stdlib.h>
#include <string.h>

#include "realtime-private.h"

/* The joined text of a final event's segments, or NULL. */
static char *
rt_final_text(struct json_object *o)
{
	struct json_object *segs, *seg, *t;
	size_t i, len = 1, at = 0, k;
	char *s;

	if (!json_object_object_get_ex(o, "segments", &segs) ||
	    !json_object_is_type(segs, json_type_array))
		return NULL;
	for (i = 0; i < json_object_array_length(segs); i++)
		if (json_object_object_get_ex(json_object_array_get_idx(segs,
		    i), "text", &t))
			len += (size_t)json_object_get_string_len(t);
	if ((s = malloc(len)) == NULL)
		return NULL;
	for (i = 0; i < json_object_array_length(segs); i++) {
		seg = json_object_array_get_idx(segs, i);
		if (!json_object_object_get_ex(seg, "text", &t))
			continue;
		k = (size_t)json_object_get_string_len(t);
		memcpy(s + at, json_object_get_string(t), k);
		at += k;
	}
	s[at] = '\0';
	return s;
}

/* Speaker n (1 for sotto's S1) as OpenAI's label: A ... Z, AA, AB, ... */
static void
rt_speaker_label(int n, char out[8])
{
	char tmp[8];
	int k = 0, i;

	for (; n > 0 && k < 7; n = (n - 1) / 26)
		tmp[k++] = (char)('A' + (n - 1) % 26);
	for (i = 0; i < k; i++)
		out[i] = tmp[k - 1 - i];
	out[k] = '\0';
}

/*
 * A final's labelled segments (their text not blank) as
 * conversation.item.input_audio_transcription.segment events: times are
 * the item's (its session's), in seconds.
 */
static void
rt_segments(struct rt_conn *c, struct rt_item *it, struct json_object *o)
{
	struct json_object *segs, *seg, *v, *e;
	const char *text, *who;
	char id[RT_ID_MAX + 16], label[8];
	size_t i;

	if (!json_object_object_get_ex(o, "segments", &segs))
		return;
	for (i = 0; i < json_object_array_length(segs); i++) {
		seg = json_object_array_get_idx(segs, i);
		if (!json_object_object_get_ex(seg, "speaker", &v) ||
		    (who = json_object_get_string(v))[0] != 'S' ||
		    !json_object_object_get_ex(seg, "text", &v))
			continue;
		text = json_object_get_string(v);
		text += strspn(text, " ");
		if (text[0] == '\0')
			continue;
		rt_speaker_label(atoi(who + 1), label);
		snprintf(id, sizeof(id), "%s_seg_%d", it->id, it->n_segments++);
		e = rt_event("conversation.item.input_audio_transcription."
		    "segment");
		json_object_object_add(e, "content_index",
		    json_object_new_int(0));
		json_object_object_add(e, "item_id",
		    json_object_new_string(it->id));
		json_object_object_add(e, "id", json_object_new_string(id));
		json_object_object_add(e, "text", json_object_new_string(text));
		json_object_object_add(e, "speaker",
		    json_object_new_string(label));
		json_object_object_add(e, "start", json_object_new_double(
		    json_object_object_get_ex(seg, "start", &v) ?
		    json_object_get_double(v) : 0));
		json_object_object_add(e, "end", json_object_new_double(
		    json_object_object_get_ex(seg, "end", &v) ?
		    json_object_get_double(v) : 0));
		rt_send(c, e);
	}
}

/* A final's text: the item's next delta, and kept for its transcript. */
static void
rt_final(struct rt_conn *c, struct json_object *f)
{
	struct rt_item *it = TAILQ_FIRST(&c->items);
	struct json_object *o;
	size_t have;
	char *t, *s;

	if (it == NULL || (t = rt_final_text(f)) == NULL)
		return;
	have = it->text != NULL ? strlen(it->text) : 0;
	if (t[0] != '\0' && (s = realloc(it->text, have + strlen(t) + 1)) !=
	    NULL) {
		memcpy(s + have, t, strlen(t) + 1);
		it->text = s;
		o = rt_event("conversation.item.input_audio_transcription."
		    "delta");
		json_object_object_add(o, "content_index",
		    json_object_new_int(0));
		json_object_object_add(o, "delta", json_object_new_string(t));
		json_object_object_add(o, "item_id",
		    json_object_new_string(it->id));
		rt_send(c, o);
	}
	free(t);
	if (c->cfg.diarize)
		rt_segments(c, it, f);
}

/* The item's transcription failed: why, in OpenAI's words. */
static void
rt_send_failed(struct rt_conn *c, const struct rt_item *it, const char *code,
    const char *msg)
{
	struct json_object *o, *e = json_object_new_object();

	json_object_object_add(e, "type",
	    json_object_new_string("transcription_error"));
	json_object_object_add(e, "code", json_object_new_string(code));
	json_object_object_add(e, "message", json_object_new_string(msg));
	o = rt_event("conversation.item.input_audio_transcription.failed");
	json_object_object_add(o, "content_index", json_object_new_int(0));
	json_object_object_add(o, "error", e);
	json_object_object_add(o, "item_id", json_object_new_string(it->id));
	rt_send(c, o);
}

/* The items still waiting will not be transcribed: each its failed. */
static void
rt_fail_items(struct rt_conn *c, const char *code, const char *msg)
{
	struct rt_item *it;

	while ((it = TAILQ_FIRST(&c->items)) != NULL) {
		if (it->committed)
			rt_send_failed(c, it, code, msg);
		rt_item_free(c, it);
	}
}

/* A session event (the sottod protocol's JSON): finals and errors. */
void
rt_session_event(struct rt_conn *c, const char *json)
{
	struct json_object *o, *v;
	struct rt_item *it = TAILQ_FIRST(&c->items);
	const char *type, *code, *m;

	if ((o = json_tokener_parse(json)) == NULL)
		return;
	type = json_object_object_get_ex(o, "type", &v) ?
	    json_object_get_string(v) : "";
	if (strcmp(type, "final") == 0)
		rt_final(c, o);
	else if (strcmp(type, "error") == 0) {
		code = json_object_object_get_ex(o, "code", &v) ?
		    json_object_get_string(v) : "internal";
		m = json_object_object_get_ex(o, "message", &v) ?
		    json_object_get_string(v) : "error";
		if (it != NULL && it->committed)
			rt_send_failed(c, it, code, m);
		rt_send_error(c, strcmp(code, "internal") == 0 ? "server_error" :
		    "invalid_request_error", code, NULL, m);
	}
	json_object_put(o);
}

/* The first item's session is over: its transcript, then the next. */
void
rt_session_ended(struct rt_conn *c)
{
	struct rt_item *it = TAILQ_FIRST(&c->items);
	struct peer *p = c->ws.peer;

	if (p->session != NULL)
		session_detach(p->session, p);
	p->state = PEER_READY;
	peer_timer(p);
	if (it == NULL || !it->open)
		return;
	if (!it->committed) {		/* a drain ended it: commit it now */
		it->committed = 1;
		c->filling = NULL;
		rt_send_committed(c, it);
	}
	rt_send_completed(c, it);
	rt_item_free(c, it);
	if (core_draining() || (p->flags & PEER_EOF)) {
		rt_fail_items(c, "shutdown", "sottod is stopping: the item "
		    "was not transcribed");
		peer_close_after_flush(p);
		return;
	}
	rt_next(c);
}
