/*
 * The OpenAI audio API (docs/http.md): POST /v1/audio/transcriptions and
 * /v1/audio/translations take a multipart form (file, model, language,
 * prompt, temperature, response_format, timestamp_granularities[]);
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
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "core.h"
#include "http.h"
#include "httpd.h"
#include "log.h"
#include "multipart.h"
#include "session.h"
#include "tailq.h"
#include "worker.h"

#define HTTP_FORM_PARTS		32
#define HTTP_PROMPT_MAX		4096
#define HTTP_TRIM_BYTES		(1024 * 1024)

/* timestamp_granularities[] (verbose_json) */
#define HTTP_GRAN_SEGMENT	0x1
#define HTTP_GRAN_WORD		0x2

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
	TAILQ_ENTRY(http_job)	 entry;
};
static TAILQ_HEAD(, http_job) http_jobs = TAILQ_HEAD_INITIALIZER(http_jobs);
static uint64_t http_next_job = 1;

/* The form's fields, pointing into the body (not NUL-terminated). */
struct http_form {
	const char *param;		/* the field an error is about */
	const struct multipart_part *file;
	struct worker_file_params p;
	enum http_format format;
	int granularity;		/* HTTP_GRAN_* */
	char prompt[HTTP_PROMPT_MAX + 1];
};

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
 * Watch j's connection for the client closing it (where the event
 * backend can tell: EV_FEATURE_EARLY_CLOSE; elsewhere the job runs on).
 */
static void
http_job_watch(struct http_job *j)
{
	struct evhttp_connection *evcon;
	struct bufferevent *bev;
	evutil_socket_t fd;

	if (!(event_base_get_features(core_base()) & EV_FEATURE_EARLY_CLOSE) ||
	    (evcon = evhttp_request_get_connection(j->req)) == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL ||
	    (fd = bufferevent_getfd(bev)) < 0)
		return;
	if ((j->gone = event_new(core_base(), fd, EV_CLOSED, http_job_gone,
	    j)) != NULL && event_add(j->gone, NULL) != 0)
		http_job_unwatch(j);
}

/* A field's value as a string (at most len - 1 bytes); -1 when longer. */
static int
http_field(const struct multipart_part *p, char *buf, size_t len)
{
	if (p->len >= len || memchr(p->data, '\0', p->len) != NULL)
		return -1;
	memcpy(buf, p->data, p->len);
	buf[p->len] = '\0';
	return 0;
}

/*
 * A language the loaded model knows, or "auto" (as ""): an ISO 639-1
 * code, or a BCP 47 tag by its primary subtag ("en-US", "pt_BR": en,
 * pt; any case), as the Wyoming door takes it.
 */
static int
http_language(const char *v, char *out, char *msg, size_t msglen)
{
	char lang[PROTO_LANGUAGE_MAX];
	const char *code;
	size_t k;
	int i, n;

	if (*v == '\0' || strcmp(v, "auto") == 0) {
		*out = '\0';
		return 0;
	}
	for (k = 0; v[k] != '\0' && v[k] != '-' && v[k] != '_' &&
	    k + 1 < sizeof(lang); k++)
		lang[k] = (char)tolower((unsigned char)v[k]);
	lang[k] = '\0';
	n = core_multilingual() ? sotto_language_count(core_model()) : 0;
	for (i = 0; i < n; i++)
		if ((code = sotto_language_code(core_model(), i)) != NULL &&
		    strcmp(code, lang) == 0)
			break;
	if ((!core_multilingual() && strcmp(lang, "en") == 0) || i < n) {
		memcpy(out, lang, k + 1);
		return 0;
	}
	if (!core_multilingual())
		snprintf(msg, msglen, "language: model %s is English-only: "
		    "language must be en (or en-US, en-GB...), not '%.32s'",
		    core_model_name(), v);
	else
		snprintf(msg, msglen, "language: unknown language '%.64s' (an "
		    "ISO 639-1 code such as en or de, or a tag such as en-US)",
		    v);
	return -1;
}

static int
http_temperature(const char *v, float *ret)
{
	char *end;
	float t;

	errno = 0;
	t = strtof(v, &end);
	if (*v == '\0' || *end != '\0' || errno != 0 || !isfinite(t) ||
	    t < 0.0f || t > 1.0f)
		return -1;
	*ret = t;
	return 0;
}

/* One form field into f; -1 with msg. */
static int
http_form_field(struct http_form *f, const struct multipart_part *p,
    int *granularity, char *msg, size_t msglen)
{
	char v[64];

	if (strcmp(p->name, "file") == 0) {
		if (f->file != NULL) {
			snprintf(msg, msglen, "more than one file");
			return -1;
		}
		f->file = p;
		return 0;
	}
	if (strcmp(p->name, "prompt") == 0) {
		if (http_field(p, f->prompt, sizeof(f->prompt)) != 0) {
			snprintf(msg, msglen, "prompt: at most %d bytes of "
			    "text", HTTP_PROMPT_MAX);
			return -1;
		}
		f->p.prompt = f->prompt;
		return 0;
	}
	if (strcmp(p->name, "model") != 0 && strcmp(p->name, "language") &&
	    strcmp(p->name, "temperature") && strcmp(p->name,
	    "response_format") && strcmp(p->name, "timestamp_granularities[]")
	    && strcmp(p->name, "stream"))
		return 0;	/* unknown fields are ignored, as OpenAI's */
	if (http_field(p, v, sizeof(v)) != 0) {
		snprintf(msg, msglen, "%.64s: value too long", p->name);
		return -1;
	}
	if (strcmp(p->name, "language") == 0)
		return http_language(v, f->p.language, msg, msglen);
	if (strcmp(p->name, "temperature") == 0) {
		if (http_temperature(v, &f->p.temperature) == 0)
			return 0;
		snprintf(msg, msglen, "temperature: '%s' is not a number "
		    "from 0 to 1", v);
		return -1;
	}
	if (strcmp(p->name, "response_format") == 0) {
		if (http_format_parse(v, &f->format) == 0)
			return 0;
		snprintf(msg, msglen, "response_format: '%s' is not json, "
		    "text, srt, vtt or verbose_json", v);
		return -1;
	}
	if (strcmp(p->name, "timestamp_granularities[]") == 0) {
		if (strcmp(v, "segment") == 0) {
			*granularity |= HTTP_GRAN_SEGMENT;
			return 0;
		}
		if (strcmp(v, "word") == 0) {
			*granularity |= HTTP_GRAN_WORD;
			return 0;
		}
		snprintf(msg, msglen, "timestamp_granularities[]: '%s' is "
		    "not segment or word", v);
		return -1;
	}
	if (strcmp(p->name, "stream") == 0 && strcmp(v, "false") != 0) {
		snprintf(msg, msglen, "stream: streamed transcription is not "
		    "supported over HTTP (use the WebSocket or the socket)");
		return -1;
	}
	return 0;	/* model: any name means the loaded model */
}

/*
 * The request's form into f; -1 with msg (a 400), and f->param the
 * field it is about (or NULL).
 */
static int
http_form(struct evhttp_request *req, enum sotto_task task,
    struct http_form *f, struct multipart_part *parts, char *msg,
    size_t msglen)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	char boundary[MULTIPART_BOUNDARY_MAX];
	size_t len = evbuffer_get_length(in);
	const uint8_t *body;
	int n, i;

	memset(f, 0, sizeof(*f));
	f->p.task = task;
	f->p.beam_size = core_config()->http_beam_size;
	if (multipart_boundary(evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Content-Type"), boundary,
	    msg, msglen) != 0)
		return -1;
	if ((body = evbuffer_pullup(in, -1)) == NULL && len > 0) {
		snprintf(msg, msglen, "out of memory");
		return -1;
	}
	if ((n = multipart_parse(body, len, boundary, parts, HTTP_FORM_PARTS,
	    msg, msglen)) < 0)
		return -1;
	for (i = 0; i < n; i++)
		if (http_form_field(f, &parts[i], &f->granularity, msg,
		    msglen) != 0) {
			f->param = parts[i].name;
			return -1;
		}
	if (f->file == NULL) {
		f->param = "file";
		snprintf(msg, msglen, "no file: send the audio as the form "
		    "field 'file'");
		return -1;
	}
	if (f->granularity && f->format != HTTP_FORMAT_VERBOSE) {
		f->param = "timestamp_granularities[]";
		snprintf(msg, msglen, "timestamp_granularities[] needs "
		    "response_format verbose_json");
		return -1;
	}
	/* OpenAI's default: segments; words only when asked for */
	if (f->granularity == 0)
		f->granularity = HTTP_GRAN_SEGMENT;
	f->p.word_timestamps = (f->granularity & HTTP_GRAN_WORD) != 0;
	if (task == SOTTO_TASK_TRANSLATE && !core_multilingual()) {
		snprintf(msg, msglen, "model %s is English-only: it cannot "
		    "translate", core_model_name());
		return -1;
	}
	return 0;
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
	http_job_replying(j);
	switch (f->error) {
	case WORKER_FILE_OK:
		http_reply_transcript(j->req, j->format, j->task,
		    (j->granularity & HTTP_GRAN_SEGMENT) != 0,
		    (j->granularity & HTTP_GRAN_WORD) != 0, f);
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
	TAILQ_INSERT_TAIL(&http_jobs, j, entry);
	if ((wf = worker_file_new(http_next_job++, data, form.file->len,
	    &form.p, http_file_done, j, msg)) == NULL) {
		http_job_replying(j);
		httpd_reply_error(req, 500, "server_error", NULL, "%s", msg);
		http_job_over(j);
		return;
	}
	j->file = wf;
	http_job_watch(j);
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
