/*
 * The OpenAI audio API (docs/http.md): POST /v1/audio/transcriptions and
 * /v1/audio/translations take a multipart form (file, model, language,
 * prompt, temperature, response_format, timestamp_granularities[],
 * known_speaker_names[]); diarized_json has the file's speakers labelled
 * after its transcription, in the same job;
 * GET /v1/models lists the loaded model.
 *
 * evhttp reads the whole upload (at most max_request_bytes) without
 * blocking the loop; the form is split here (multipart.c) and the file
 * handed to the compute thread as a worker-file job, which decodes and
 * transcribes it as `sotto transcribe` does. The request waits, and is
 * answered when the job comes back. A job counts as a session against
 * max_sessions (429 when over it) and a drain (SIGTERM) waits for it
 * and for its reply to be written.
 *
 * evhttp does not read a connection while its request waits for the
 * reply, so it would not notice a client that went away: an EV_CLOSED
 * event on the socket (epoll's EPOLLRDHUP) does, and the job is
 * canceled at its next window (worker_file_cancel) and the connection
 * freed; the job is forgotten when it comes back.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "core.h"
#include "http.h"
#include "httpd.h"
#include "log.h"
#include "http-form.h"
#include "multipart.h"
#include "session.h"
#include "tailq.h"
#include "worker.h"

#define HTTP_TRIM_BYTES		(1024 * 1024)

/* One request being answered. */
struct http_job {
	struct evhttp_request	*req;		/* NULL once evhttp freed it */
	struct evhttp_connection *evcon;	/* while the reply is written */
	struct worker_file	*file;		/* until done(), or NULL */
	struct event		*gone;		/* the client closes, or NULL */
	enum http_format	 format;
	int			 granularity;	/* HTTP_GRAN_* */
	enum sotto_task		 task;
	double			 t0;
	int			 replied;
	int			 stream;	/* stream=true */
	int			 streaming;	/* its 200 went out */
	struct http_speaker_names names;	/* diarized_json's */
	TAILQ_ENTRY(http_job)	 entry;
};
static TAILQ_HEAD(, http_job) http_jobs = TAILQ_HEAD_INITIALIZER(http_jobs);
static uint64_t http_next_job = 1;

int
http_busy(void)
{
	struct http_job *j;
	int n = 0;

	TAILQ_FOREACH(j, &http_jobs, entry)
		n++;
	return n;
}

/* Stop watching for the client going away. */
static void
http_job_unwatch(struct http_job *j)
{
	if (j->gone != NULL)
		event_free(j->gone);
	j->gone = NULL;
}

static void
http_job_free(struct http_job *j)
{
	http_job_unwatch(j);
	TAILQ_REMOVE(&http_jobs, j, entry);
	free(j);
	core_drain_check();
}

/* The reply is written (or its connection went): the job is over. */
static void
http_job_sent(struct evhttp_request *req, void *arg)
{
	struct http_job *j = arg;

	if (j->evcon != NULL)
		evhttp_connection_set_closecb(j->evcon, NULL, NULL);
	http_job_free(j);
}

static void
http_job_closed(struct evhttp_connection *evcon, void *arg)
{
	http_job_free(arg);
}

/*
 * Watch the reply about to be sent for j until it is written; without
 * a connection (evhttp frees the request at once) the job is over now:
 * call http_job_over after sending.
 */
static void
http_job_replying(struct http_job *j)
{
	http_job_unwatch(j);
	j->replied = 1;
	j->evcon = evhttp_request_get_connection(j->req);
	if (j->evcon == NULL)
		return;
	evhttp_request_set_on_complete_cb(j->req, http_job_sent, j);
	evhttp_connection_set_closecb(j->evcon, http_job_closed, j);
}

/* After the reply was handed to evhttp. */
static void
http_job_over(struct http_job *j)
{
	if (j->evcon == NULL)
		http_job_free(j);
}

/* evhttp is going away (httpd_stop): forget its requests. */
void
http_openai_stop(void)
{
	struct http_job *j, *next;

	TAILQ_FOREACH_SAFE(j, &http_jobs, entry, next) {
		if (j->replied) {
			evhttp_connection_set_closecb(j->evcon, NULL, NULL);
			http_job_free(j);
			continue;
		}
		http_job_unwatch(j);
		j->req = NULL;	/* the job's done() frees it */
	}
}

/* The client closed its connection before the reply: give up the job. */
static void
http_job_gone(evutil_socket_t fd, short what, void *arg)
{
	struct http_job *j = arg;
	struct evhttp_connection *evcon;

	(void)fd;
	(void)what;
	http_job_unwatch(j);
	if (j->req == NULL || j->replied)
		return;
	log_info("http: the client went away: its %s is canceled",
	    j->task == SOTTO_TASK_TRANSLATE ? "translation" :
	    "transcription");
	if (j->file != NULL)
		worker_file_cancel(j->file);
	evcon = evhttp_request_get_connection(j->req);
	j->req = NULL;		/* freed with its connection */
	if (evcon != NULL)
		evhttp_connection_free(evcon);
}


/*
 * A streamed reply's connection closed before the transcript was done
 * (evhttp frees it and its request): the job is canceled, forgotten
 * when it comes back.
 */
static void
http_stream_closed(struct evhttp_connection *evcon, void *arg)
{
	struct http_job *j = arg;

	(void)evcon;
	http_job_unwatch(j);
	j->req = NULL;
	if (j->file != NULL)
		worker_file_cancel(j->file);
}

/* stream=true: the 200 with the first segments, each a delta. */
static void
http_file_segments(struct worker_file *f, const struct worker_segment *seg,
    int n, void *arg)
{
	struct http_job *j = arg;
	struct evhttp_connection *evcon;
	const char *t;
	int i;

	(void)f;
	if (j->req == NULL)
		return;
	if (!j->streaming) {
		j->streaming = 1;
		if ((evcon = evhttp_request_get_connection(j->req)) != NULL)
			evhttp_connection_set_closecb(evcon,
			    http_stream_closed, j);
		http_stream_start(j->req);
	}
	for (i = 0; i < n && j->req != NULL; i++) {
		for (t = seg[i].text; j->streaming == 1 && isspace(
		    (unsigned char)*t); t++)
			;	/* the text starts without a blank */
		if (*t == '\0')
			continue;
		j->streaming = 2;
		http_stream_delta(j->req, t);
	}
}

/* The streamed reply's end: the whole text, or an error event. */
static void
http_stream_end(struct http_job *j, const struct worker_file *f)
{
	if (f->error == WORKER_FILE_OK) {
		if (j->format == HTTP_FORMAT_DIARIZED)
			http_stream_segments(j->req, f, &j->names);
		http_stream_done(j->req, f);
	} else
		http_stream_error(j->req, "server_error", f->error ==
		    WORKER_FILE_CANCELED ? "shutting_down" : f->error ==
		    WORKER_FILE_BAD_INPUT ? "invalid_audio" : NULL, f->err);
}

/* Loop thread: the compute thread is done with the file. */
static void
http_file_done(struct worker_file *f, void *arg)
{
	struct http_job *j = arg;

	j->file = NULL;
	core_count_file(f->duration, f->compute_s);
	log_info("http: %s of %.1f s of audio in %.2f s (%.2f s in all)%s%s",
	    j->task == SOTTO_TASK_TRANSLATE ? "translation" : "transcription",
	    f->duration, f->compute_s, core_now() - j->t0,
	    f->error ? ": " : "", f->error ? f->err : "");
	if (j->req == NULL) {		/* evhttp or the client is gone */
		http_job_free(j);
		worker_file_free(f);
		return;
	}
	if (j->stream && f->error == WORKER_FILE_OK && !j->streaming) {
		http_stream_start(j->req);	/* no segments: no delta */
		j->streaming = 1;
	}
	http_job_replying(j);
	if (j->streaming) {
		http_stream_end(j, f);
		http_job_over(j);
		worker_file_free(f);
		return;
	}
	switch (f->error) {
	case WORKER_FILE_OK:
		http_reply_transcript(j->req, j->format, j->task,
		    (j->granularity & HTTP_GRAN_SEGMENT) != 0,
		    (j->granularity & HTTP_GRAN_WORD) != 0, &j->names, f);
		break;
	case WORKER_FILE_BAD_INPUT:
		httpd_reply_param_error(j->req, 400, "invalid_request_error",
		    "invalid_audio", "file", "%s", f->err);
		break;
	case WORKER_FILE_CANCELED:
		httpd_reply_error(j->req, 503, "server_error", "shutting_down",
		    "%s", f->err);
		break;
	default:
		httpd_reply_error(j->req, 500, "server_error", NULL,
		    "transcription failed: %s", f->err);
		break;
	}
	http_job_over(j);
	worker_file_free(f);
}

/*
 * diarized_json: the speaker models into p (loaded by the first such
 * request); -1 when they do not load, answered 503 with why and what to
 * do (a fetched model is loaded by the next request).
 */
static int
http_speakers(struct evhttp_request *req, struct worker_file_params *p)
{
	char err[PROTO_MSG_MAX];

	if (core_speakers(&p->speakers, &p->speakers_vad, err,
	    sizeof(err)) != 0) {
		httpd_reply_error(req, 503, "server_error",
		    "speaker_model_unavailable", "%s", err);
		return -1;
	}
	sotto_diarize_params_init(&p->diarize);
	return 0;
}

static void
http_audio(struct evhttp_request *req, enum sotto_task task)
{
	struct multipart_part parts[HTTP_FORM_PARTS];
	struct worker_file *wf;
	struct http_form form;
	struct http_job *j;
	char msg[PROTO_MSG_MAX];
	void *data;
	size_t len;

	if (http_form(req, task, &form, parts, msg, sizeof(msg)) != 0) {
		httpd_reply_param_error(req, 400, "invalid_request_error", NULL,
		    form.param, "%s", msg);
		return;
	}
	if (core_draining()) {
		httpd_reply_error(req, 503, "server_error", "shutting_down",
		    "sottod is stopping");
		return;
	}
	if (session_count() >= core_config()->max_sessions) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Retry-After", "1");
		httpd_reply_error(req, 429, "rate_limit_error", "busy",
		    "sottod is busy: %d sessions (max_sessions = %d); try "
		    "again", session_count(), core_config()->max_sessions);
		return;
	}
	if (form.format == HTTP_FORMAT_DIARIZED && http_speakers(req,
	    &form.p) != 0)
		return;
	if ((j = calloc(1, sizeof(*j))) == NULL ||
	    (data = malloc(form.file->len + 1)) == NULL) {
		free(j);
		httpd_reply_error(req, 500, "server_error", NULL,
		    "out of memory");
		return;
	}
	memcpy(data, form.file->data, form.file->len);
	/*
	 * The form is not needed any more: do not hold the upload twice,
	 * and give a big one's memory back while the file is transcribed.
	 */
	len = evbuffer_get_length(evhttp_request_get_input_buffer(req));
	evbuffer_drain(evhttp_request_get_input_buffer(req), len);
	if (len >= HTTP_TRIM_BYTES)
		core_trim_memory();
	j->req = req;
	j->format = form.format;
	j->granularity = form.granularity;
	j->task = task;
	j->t0 = core_now();
	j->stream = form.stream;
	j->names = form.names;
	/* diarized: the segments come labelled, at the end */
	if (j->stream && j->format != HTTP_FORMAT_DIARIZED)
		form.p.segments = http_file_segments;
	TAILQ_INSERT_TAIL(&http_jobs, j, entry);
	if ((wf = worker_file_new(http_next_job++, data, form.file->len,
	    &form.p, http_file_done, j, msg)) == NULL) {
		http_job_replying(j);
		httpd_reply_error(req, 500, "server_error", NULL, "%s", msg);
		http_job_over(j);
		return;
	}
	j->file = wf;
	/* where the event backend cannot tell, the job runs on */
	j->gone = httpd_watch_close(req, http_job_gone, j);
}

void
http_transcriptions(struct evhttp_request *req)
{
	http_audio(req, SOTTO_TASK_TRANSCRIBE);
}

void
http_translations(struct evhttp_request *req)
{
	http_audio(req, SOTTO_TASK_TRANSLATE);
}

/*
 * The names of OpenAI's transcription models, which clients send as
 * model= (and look up first): each is the loaded model.
 */
static const char *const http_model_aliases[] = {
	"whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe",
};

static struct json_object *
http_model_object(const char *id)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "id", json_object_new_string(id));
	json_object_object_add(o, "object", json_object_new_string("model"));
	json_object_object_add(o, "created",
	    json_object_new_int64((int64_t)(time(NULL) - core_uptime())));
	json_object_object_add(o, "owned_by", json_object_new_string("sotto"));
	return o;
}

/* GET /v1/models: the loaded model (the aliases are not listed). */
void
http_models(struct evhttp_request *req)
{
	struct json_object *o = json_object_new_object(), *a;

	a = json_object_new_array();
	json_object_array_add(a, http_model_object(core_model_name()));
	json_object_object_add(o, "object", json_object_new_string("list"));
	json_object_object_add(o, "data", a);
	httpd_reply_object(req, HTTP_OK, o);
}

/*
 * GET /v1/models/ID: the loaded model, under its name or an alias that
 * transcriptions take; any other name is 404.
 */
void
http_model(struct evhttp_request *req)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req)), *id = path + strlen("/v1/models/");
	size_t i;

	if (strcmp(id, core_model_name()) == 0) {
		httpd_reply_object(req, HTTP_OK, http_model_object(id));
		return;
	}
	for (i = 0; i < sizeof(http_model_aliases) /
	    sizeof(http_model_aliases[0]); i++)
		if (strcmp(id, http_model_aliases[i]) == 0) {
			httpd_reply_object(req, HTTP_OK,
			    http_model_object(id));
			return;
		}
	httpd_reply_param_error(req, 404, "invalid_request_error",
	    "model_not_found", "model", "the model '%.64s' does not exist "
	    "(this sottod serves %s, also as whisper-1, gpt-4o-transcribe "
	    "and gpt-4o-mini-transcribe)", id, core_model_name());
}
