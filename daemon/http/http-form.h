/*
 * The form of POST /v1/audio/transcriptions and /translations
 * (http-form.c): its fields checked and gathered for the job, and the
 * streamed reply of stream=true (http-stream.c).
 */
#ifndef SOTTOD_HTTP_FORM_H
#define SOTTOD_HTTP_FORM_H

#include <stddef.h>

#include "http.h"
#include "multipart.h"
#include "worker.h"

#define HTTP_FORM_PARTS		32
#define HTTP_PROMPT_MAX		4096

/* timestamp_granularities[] (verbose_json) */
#define HTTP_GRAN_SEGMENT	0x1
#define HTTP_GRAN_WORD		0x2

struct evhttp_request;

/* The form's fields, pointing into the body (not NUL-terminated). */
struct http_form {
	const char *param;		/* the field an error is about */
	const struct multipart_part *file;
	struct worker_file_params p;
	enum http_format format;
	int granularity;		/* HTTP_GRAN_* */
	int stream;			/* stream=true: Server-Sent Events */
	struct http_speaker_names names;	/* known_speaker_names[] */
	char prompt[HTTP_PROMPT_MAX + 1];
};

/*
 * The request's form into f (parts: HTTP_FORM_PARTS); -1 with msg (a
 * 400), and f->param the field it is about (or NULL).
 */
int	http_form(struct evhttp_request *, enum sotto_task,
	    struct http_form *f, struct multipart_part *parts, char *msg,
	    size_t msglen);

/*
 * http-stream.c: stream=true's reply, as OpenAI's: Server-Sent Events,
 * data: {"type": "transcript.text.delta", "delta"} for each segment as
 * it is decided, then {"type": "transcript.text.done", "text", "usage"}.
 * start sends the 200 and its headers; the others one event each; end
 * and error (an error event, after the 200) finish the reply.
 */
void	http_stream_start(struct evhttp_request *);
void	http_stream_delta(struct evhttp_request *, const char *text);
/* diarized_json: each labelled segment as a delta and a segment event. */
void	http_stream_segments(struct evhttp_request *, const struct worker_file *,
	    const struct http_speaker_names *);
void	http_stream_done(struct evhttp_request *, const struct worker_file *);
void	http_stream_error(struct evhttp_request *, const char *type,
	    const char *code, const char *msg);

#endif
