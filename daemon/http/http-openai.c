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
 * A client that goes away while its request waits has the job canceled
 * at its next window and forgotten when it comes back (struct httpd_job,
 * as Deepgram's files).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "core.h"
#include "http.h"
#include "httpd.h"
#include "httpd-job.h"
#include "http-form.h"
#include "multipart.h"
#include "session.h"
#include "worker.h"

#define HTTP_TRIM_BYTES		(1024 * 1024)

/* One request being answered: see struct httpd_job for who frees it. */
struct http_job {
	struct httpd_job	 job;		/* first: freed with it */
	enum http_format	 format;
	int			 granularity;	/* HTTP_GRAN_* */
	enum sotto_task		 task;
	int			 stream;	/* stream=true */
	int			 streaming;	/* its 200 went out */
	struct http_speaker_names names;	/* diarized_json's */
};
_Static_assert(offsetof(struct http_job, job) == 0,
    "struct httpd_job frees the struct it starts");
static struct httpd_job_list http_jobs = TAILQ_HEAD_INITIALIZER(http_jobs);
static uint64_t http_next_job = 1;

int
http_busy(void)
{
	return httpd_jobs_count(&http_jobs);
}

/* evhttp is going away (httpd_stop): forget its requests. */
void
http_openai_stop(void)
{
	httpd_jobs_stop(&http_jobs);
}

/* stream=true: the 200 with the first segments, each a delta. */
static void
http_file_segments(struct worker_file *f, const struct worker_segment *seg,
    int n, void *arg)
{
	struct http_job *j = arg;
	const char *t;
	int i;

	(void)f;
	if (j->job.req == NULL)
		return;
	if (!j->streaming) {
		j->streaming = 1;
		http_stream_start(j->job.req);
	}
	for (i = 0; i < n && j->job.req != NULL; i++) {
		for (t = seg[i].text; j->streaming == 1 && isspace(
		    (unsigned char)*t); t++)
			;	/* the text starts without a blank */
		if (*t == '\0')
			continue;
		j->streaming = 2;
		http_stream_delta(j->job.req, t);
	}
}

/* The streamed reply's end: the whole text, or an error event. */
static void
http_stream_end(struct http_job *j, struct evhttp_request *req,
    const struct worker_file *f)
{
	if (f->error == WORKER_FILE_OK) {
		if (j->format == HTTP_FORMAT_DIARIZED)
			http_stream_segments(req, f, &j->names);
		http_stream_done(req, f);
	} else
		http_stream_error(req, "server_error", f->error ==
		    WORKER_FILE_CANCELED ? "shutting_down" : f->error ==
		    WORKER_FILE_BAD_INPUT ? "invalid_audio" : NULL, f->err);
}

/* The reply with the whole transcript, or the job's error. */
static void
http_file_reply(struct http_job *j, struct evhttp_request *req,
    const struct worker_file *f)
{
	switch (f->error) {
	case WORKER_FILE_OK:
		http_reply_transcript(req, j->format, j->task,
		    (j->granularity & HTTP_GRAN_SEGMENT) != 0,
		    (j->granularity & HTTP_GRAN_WORD) != 0, &j->names, f);
		break;
	case WORKER_FILE_BAD_INPUT:
		httpd_reply_param_error(req, 400, "invalid_request_error",
		    "invalid_audio", "file", "%s", f->err);
		break;
	case WORKER_FILE_CANCELED:
		httpd_reply_error(req, 503, "server_error", "shutting_down",
		    "%s", f->err);
		break;
	default:
		httpd_reply_error(req, 500, "server_error", NULL,
		    "transcription failed: %s", f->err);
		break;
	}
}

/* Loop thread: the compute thread is done with the file. */
static void
http_file_done(struct worker_file *f, void *arg)
{
	struct http_job *j = arg;
	struct evhttp_request *req;

	if ((req = httpd_job_back(&j->job, f)) != NULL) {
		if (j->stream && f->error == WORKER_FILE_OK && !j->streaming) {
			http_stream_start(req);	/* no segments: no delta */
			j->streaming = 1;
		}
		if (j->streaming)
			http_stream_end(j, req, f);
		else
			http_file_reply(j, req, f);
		httpd_job_replied(&j->job);
	}
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
	j->format = form.format;
	j->granularity = form.granularity;
	j->task = task;
	j->stream = form.stream;
	j->names = form.names;
	/* diarized: the segments come labelled, at the end */
	if (j->stream && j->format != HTTP_FORMAT_DIARIZED)
		form.p.segments = http_file_segments;
	httpd_job_add(&http_jobs, &j->job, req, "http",
	    task == SOTTO_TASK_TRANSLATE ? "translation" : "transcription");
	if ((wf = worker_file_new(http_next_job++, data, form.file->len,
	    &form.p, http_file_done, j, msg)) == NULL) {
		httpd_reply_error(httpd_job_reply(&j->job), 500, "server_error",
		    NULL, "%s", msg);
		httpd_job_replied(&j->job);
		return;
	}
	httpd_job_watch(&j->job, wf);
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
