/*
 * The HTTP front door (docs/http.md): libevent's evhttp on the loop
 * thread, off unless [http] listen or --http names an address.
 *
 * Routes are registered here; other front doors on the same listener
 * (the WebSocket endpoint) add theirs with evhttp_set_cb(http_server(),
 * ...) after http_start. Every error is a JSON body shaped like
 * OpenAI's: {"error": {"message": ..., "type": ..., "code": ...}}.
 */
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "http.h"
#include "listen-addr.h"
#include "log.h"
#include "sottod.h"

#define HTTP_BACKLOG	64

static struct {
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound;
	char				 addr[LISTEN_ADDR_MAX + 8];
} http;

struct evhttp *
http_server(void)
{
	return http.http;
}

/* Reply with json (a JSON object's text) and status code. */
void
http_reply_json(struct evhttp_request *req, int code, const char *json)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *b = evbuffer_new();

	evhttp_add_header(h, "Content-Type", "application/json");
	if (b != NULL)
		evbuffer_add_printf(b, "%s\n", json);
	evhttp_send_reply(req, code, NULL, b);
	if (b != NULL)
		evbuffer_free(b);
}

/*
 * An OpenAI-style error: type is invalid_request_error, authentication_
 * error, server_error...; code may be NULL.
 */
void
http_reply_error(struct evhttp_request *req, int status, const char *type,
    const char *code, const char *fmt, ...)
{
	struct json_object *o, *e;
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	o = json_object_new_object();
	e = json_object_new_object();
	if (o == NULL || e == NULL) {
		json_object_put(o);
		json_object_put(e);
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_object_add(e, "param", NULL);
	json_object_object_add(e, "code", code != NULL ?
	    json_object_new_string(code) : NULL);
	json_object_object_add(o, "error", e);
	log_debug("http: %s %s: %d %s", http_method_name(req),
	    evhttp_request_get_uri(req), status, msg);
	http_reply_json(req, status, json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

const char *
http_method_name(struct evhttp_request *req)
{
	switch (evhttp_request_get_command(req)) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	default: return "other";
	}
}

/* Whether req is a GET (or HEAD); else a 405 has been sent. */
int
http_want_get(struct evhttp_request *req)
{
	enum evhttp_cmd_type c = evhttp_request_get_command(req);

	if (c == EVHTTP_REQ_GET || c == EVHTTP_REQ_HEAD)
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
	    "GET, HEAD");
	http_reply_error(req, 405, "invalid_request_error",
	    "method_not_allowed", "%s takes GET, not %s",
	    evhttp_request_get_uri(req), http_method_name(req));
	return 0;
}

/*
 * GET /health: 200 while the model is loaded, the compute thread runs
 * and sottod is not stopping; else 503. Load balancers poll it.
 */
static void
http_health_cb(struct evhttp_request *req, void *arg)
{
	struct json_object *o;
	const char *why = NULL;

	if (!http_want_get(req))
		return;
	if (sottod.model == NULL)
		why = "no model loaded";
	else if (!worker_alive())
		why = "the compute thread is not running";
	else if (sottod.draining)
		why = "stopping";
	if ((o = json_object_new_object()) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	json_object_object_add(o, "status", json_object_new_string(why ==
	    NULL ? "ok" : "unavailable"));
	if (why != NULL)
		json_object_object_add(o, "reason",
		    json_object_new_string(why));
	json_object_object_add(o, "model",
	    json_object_new_string(sottod.model_name));
	json_object_object_add(o, "sessions",
	    json_object_new_int(session_count()));
	http_reply_json(req, why == NULL ? HTTP_OK : 503,
	    json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
}

static void
http_notfound_cb(struct evhttp_request *req, void *arg)
{
	http_reply_error(req, HTTP_NOTFOUND, "invalid_request_error",
	    "not_found", "no such endpoint: %s %s", http_method_name(req),
	    evhttp_request_get_uri(req));
}

/* A listening socket on addr; -1 with err. */
static int
http_listen(const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256];
	int fd, on = 1;

	if (listen_addr_parse(addr, &ss, &len, msg, sizeof(msg)) != 0) {
		snprintf(err, errlen, "http: %s", msg);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd == -1) {
		snprintf(err, errlen, "http: socket: %s", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on,
		    sizeof(on));
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
	    listen(fd, HTTP_BACKLOG) != 0) {
		snprintf(err, errlen, "http: cannot listen on %s: %s", addr,
		    strerror(errno));
		close(fd);
		return -1;
	}
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		listen_addr_format((struct sockaddr *)&ss, http.addr,
		    sizeof(http.addr));
	return fd;
}

int
http_start(char *err, size_t errlen)
{
	const char *addr = sottod.cfg.http_listen;
	int fd;

	if (*addr == '\0')
		return 0;
	if ((fd = http_listen(addr, err, errlen)) == -1)
		return -1;
	if ((http.http = evhttp_new(sottod.base)) == NULL ||
	    (http.bound = evhttp_accept_socket_with_handle(http.http,
	    fd)) == NULL) {
		snprintf(err, errlen, "http: cannot set up the server");
		close(fd);
		return -1;
	}
	/* Every method reaches a route, which answers 405 with JSON. */
	evhttp_set_allowed_methods(http.http, EVHTTP_REQ_GET |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
	    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_default_content_type(http.http, "application/json");
	evhttp_set_gencb(http.http, http_notfound_cb, NULL);
	evhttp_set_cb(http.http, "/health", http_health_cb, NULL);
	log_info("http: listening on %s", http.addr);
	return 0;
}

/* SIGTERM: take no new connections; requests in progress finish. */
void
http_drain(void)
{
	if (http.bound != NULL) {
		evhttp_del_accept_socket(http.http, http.bound);
		http.bound = NULL;
	}
}

void
http_stop(void)
{
	if (http.http != NULL)
		evhttp_free(http.http);
	memset(&http, 0, sizeof(http));
}
