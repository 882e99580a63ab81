/*
 * stream=true on POST /v1/audio/transcriptions: the reply as Server-Sent
 * Events, the way OpenAI's API sends them and its SDKs read them (one
 * "data: JSON" line and a blank line an event, no event names):
 * transcript.text.delta with each segment's text as the file's windows
 * are decided (a segment never changes once it is), then
 * transcript.text.done with the whole text, the same as the json reply's
 * "text", and its usage. The deltas joined are that text (the first one
 * without its leading blank). A failure after the 200 is an error event
 * ({"type": "error", "error": {...}}, which the SDK raises) instead.
 *
 * With response_format=diarized_json the speakers are known only once
 * the whole file is labelled: then each segment comes at the end, as a
 * transcript.text.delta with its segment_id and a transcript.text.segment
 * with its speaker (as OpenAI's diarizing model sends them), before the
 * done event. The deltas joined are the text but for the blanks between
 * segments (each segment's text is without outer blanks, as OpenAI's).
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <json-c/json.h>

#include "http-form.h"
#include "httpd.h"

/* One event: "data: " and o's JSON (o is put). */
static void
http_stream_event(struct evhttp_request *req, struct json_object *o)
{
	struct evbuffer *b = evbuffer_new();

	if (b != NULL) {
		evbuffer_add_printf(b, "data: %s\n\n",
		    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
		    JSON_C_TO_STRING_NOSLASHESCAPE));
		evhttp_send_reply_chunk(req, b);
		evbuffer_free(b);
	}
	json_object_put(o);
}

static struct json_object *
http_stream_new(const char *type)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "type", json_object_new_string(type));
	return o;
}

void
http_stream_start(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);

	evhttp_add_header(h, "Content-Type", "text/event-stream");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	httpd_count_reply(HTTP_OK);
	evhttp_send_reply_start(req, HTTP_OK, "OK");
}

void
http_stream_delta(struct evhttp_request *req, const char *text)
{
	struct json_object *o = http_stream_new("transcript.text.delta");

	json_object_object_add(o, "delta", json_object_new_string(text));
	http_stream_event(req, o);
}

void
http_stream_segments(struct evhttp_request *req, const struct worker_file *f,
    const struct http_speaker_names *names)
{
	struct json_object *seg, *o, *v;
	int i;

	for (i = 0; i < f->res->n_segments; i++) {
		seg = http_diarized_segment(&f->res->segments[i], i, names);
		o = http_stream_new("transcript.text.delta");
		if (json_object_object_get_ex(seg, "text", &v))
			json_object_object_add(o, "delta",
			    json_object_get(v));
		if (json_object_object_get_ex(seg, "id", &v))
			json_object_object_add(o, "segment_id",
			    json_object_get(v));
		http_stream_event(req, o);
		http_stream_event(req, seg);
	}
}

void
http_stream_done(struct evhttp_request *req, const struct worker_file *f)
{
	struct json_object *o = http_stream_new("transcript.text.done");
	char *text = http_text(f->res);

	json_object_object_add(o, "text", json_object_new_string(
	    text != NULL ? text : ""));
	free(text);
	json_object_object_add(o, "usage", http_usage(f));
	http_stream_event(req, o);
	evhttp_send_reply_end(req);
}

void
http_stream_error(struct evhttp_request *req, const char *type,
    const char *code, const char *msg)
{
	struct json_object *o = http_stream_new("error"),
	    *e = json_object_new_object();

	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_object_add(e, "code", code != NULL ?
	    json_object_new_string(code) : NULL);
	json_object_object_add(o, "error", e);
	http_stream_event(req, o);
	evhttp_send_reply_end(req);
}
