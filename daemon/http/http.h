/*
 * The HTTP door (docs/http.md): OpenAI's audio API (http-openai.c, its
 * forms in multipart.c, its response formats in http-format.c), the
 * operators' /health and /metrics (http-metrics.c) and the live captions
 * page at / (web.c), all on the HTTP listener (daemon/net/httpd.h).
 */
#ifndef SOTTOD_HTTP_H
#define SOTTOD_HTTP_H

#include <stddef.h>

#include "sotto.h"

struct evhttp_request;
struct json_object;
struct worker_file;

/* Add the routes, when there is a listener; registers the door. */
int	http_start(char *err, size_t errlen);

/* http-format.c: a transcript as each response_format */
enum http_format {
	HTTP_FORMAT_JSON,
	HTTP_FORMAT_TEXT,
	HTTP_FORMAT_SRT,
	HTTP_FORMAT_VTT,
	HTTP_FORMAT_VERBOSE,
	HTTP_FORMAT_DIARIZED,	/* diarized_json: segments with speaker */
};
int	http_format_parse(const char *, enum http_format *);
/* The whole text of a result, without outer blanks (NULL: no memory). */
char	*http_text(const struct sotto_result *);

/* usage: {"type": "duration", "seconds"} of f's audio */
struct json_object *http_usage(const struct worker_file *);

/* known_speaker_names[]: the labels of the first speakers, in order. */
#define HTTP_SPEAKER_NAMES	8
#define HTTP_SPEAKER_NAME_MAX	64
struct http_speaker_names {
	char	name[HTTP_SPEAKER_NAMES][HTTP_SPEAKER_NAME_MAX];
	int	n;
};
/*
 * diarized_json's segment i (speaker labelled by names), as OpenAI's
 * TranscriptionDiarizedSegment and its stream's transcript.text.segment.
 */
struct json_object *http_diarized_segment(const struct sotto_segment *,
	    int i, const struct http_speaker_names *names);
/*
 * verbose_json has segments, words (their own array) or both;
 * diarized_json's speakers are named by names.
 */
void	http_reply_transcript(struct evhttp_request *, enum http_format,
	    enum sotto_task, int segments, int words,
	    const struct http_speaker_names *names,
	    const struct worker_file *);
/*
 * http-language.c: Whisper's English name of a language code ("en":
 * "english"), as OpenAI's verbose_json gives it; the code when unknown.
 */
const char *http_language_name(const char *code);

/* http-openai.c */
void	http_transcriptions(struct evhttp_request *);
void	http_translations(struct evhttp_request *);
void	http_models(struct evhttp_request *);
/* GET /v1/models/ID (the prefix route) */
void	http_model(struct evhttp_request *);
/* Requests being answered: a drain waits for them. */
int	http_busy(void);
void	http_openai_stop(void);

/* http-metrics.c: GET /health and GET /metrics */
void	http_health(struct evhttp_request *);
void	http_metrics(struct evhttp_request *);

/* web.c: GET / */
void	web_page(struct evhttp_request *);

#endif
