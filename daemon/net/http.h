/*
 * The HTTP front door (daemon/net/http.c, docs/http.md): evhttp on the loop
 * thread. Loop thread only.
 */
#ifndef SOTTOD_HTTP_H
#define SOTTOD_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "sotto.h"

struct evhttp;
struct evhttp_request;
struct json_object;

/*
 * Serve on fd, a listening TCP socket from systemd, or (fd -1) on
 * [http] listen (no-op when empty). 0, or -1 with err.
 */
int	http_start(int fd, char *err, size_t errlen);
/* SIGTERM: stop accepting; requests in progress go on. */
void	http_drain(void);
void	http_stop(void);
/* Requests being answered: a drain waits for them. */
int	http_busy(void);

/*
 * The server, for other endpoints on the same listener (evhttp_set_cb),
 * or NULL when HTTP is off.
 */
struct evhttp *http_server(void);

/* Replies: a JSON object's text; an OpenAI-style JSON error. */
void	http_reply_json(struct evhttp_request *, int code, const char *json);
void	http_reply_error(struct evhttp_request *, int status,
	    const char *type, const char *code, const char *fmt, ...)
	    __attribute__((format(printf, 5, 6)));
/* Reply with o (JSON), and put it. */
void	http_reply_object(struct evhttp_request *, int code,
	    struct json_object *o);
const char *http_method_name(struct evhttp_request *);
/*
 * 1 when req carries "Authorization: Bearer TOKEN" or no [http] token is
 * set; otherwise a 401 was sent and 0 is returned.
 */
int	http_authorized(struct evhttp_request *);
/* 1 for GET or HEAD; otherwise a 405 was sent and 0 is returned. */
int	http_want_get(struct evhttp_request *);
/* Count a reply (GET /metrics); http_reply_json counts its own. */
void	http_count_reply(int code);
void	http_reply_counts(uint64_t counts[3]);	/* 2xx, 4xx, 5xx */

/* http-format.c: a transcript as each response_format */
enum http_format {
	HTTP_FORMAT_JSON,
	HTTP_FORMAT_TEXT,
	HTTP_FORMAT_SRT,
	HTTP_FORMAT_VTT,
	HTTP_FORMAT_VERBOSE,
};
struct worker_file;
int	http_format_parse(const char *, enum http_format *);
/* verbose_json has segments, words (their own array) or both. */
void	http_reply_transcript(struct evhttp_request *, enum http_format,
	    enum sotto_task, int segments, int words,
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
void	http_model(struct evhttp_request *, const char *id);
void	http_openai_stop(void);

/* http-conn.c: evhttp_set_bevcb; evhttp's error pages as JSON */
struct bufferevent;
struct event_base;
struct bufferevent *http_conn_bev(struct event_base *, void *arg);

/* http-metrics.c */
void	http_metrics(struct evhttp_request *);

#endif
