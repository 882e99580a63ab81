/*
 * The HTTP front door (docs/http.md): libevent's evhttp on the loop
 * thread, off unless [http] listen or --http names an address.
 *
 * Routes are registered here (http_routes); other front doors on the
 * same listener (the WebSocket endpoint) add theirs with
 * evhttp_set_cb(http_server(), ...) after http_start, and call
 * http_authorized first. Every error is a JSON body shaped like
 * OpenAI's: {"error": {"message": ..., "type": ..., "code": ...}}.
 *
 * Access: with [http] token set, every route but /health wants
 * "Authorization: Bearer TOKEN" (401 otherwise); a listener on anything
 * but a loopback address refuses to start without a token.
 *
 * Limits: evhttp refuses a body over max_request_bytes (413) and a
 * request whose headers are over HTTP_HEADERS_MAX (400), with JSON
 * bodies (http-conn.c), and drops a connection idle for
 * request_timeout_seconds while it reads a request or writes a reply.
 */
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

#define HTTP_BACKLOG		64
#define HTTP_HEADERS_MAX	(16 * 1024)

struct http_route {
	const char	*path;
	int		 methods;	/* EVHTTP_REQ_* */
	int		 open;		/* no token needed */
	void		(*fn)(struct evhttp_request *);
};

static void	http_health(struct evhttp_request *);

#define GET	(EVHTTP_REQ_GET | EVHTTP_REQ_HEAD)
static const struct http_route http_routes[] = {
	{ "/health", GET, 1, http_health },
	{ "/metrics", GET, 0, http_metrics },
	{ "/v1/models", GET, 0, http_models },
	{ "/v1/audio/transcriptions", EVHTTP_REQ_POST, 0,
	    http_transcriptions },
	{ "/v1/audio/translations", EVHTTP_REQ_POST, 0, http_translations },
};
#undef GET

static uint64_t	http_replies[3];	/* 2xx (and others), 4xx, 5xx */

void
http_count_reply(int code)
{
	http_replies[code >= 500 ? 2 : code >= 400 ? 1 : 0]++;
}

void
http_reply_counts(uint64_t counts[3])
{
	memcpy(counts, http_replies, sizeof(http_replies));
}

static struct {
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound;
	char				 addr[LISTEN_ADDR_MAX + 8];
	int				 loopback;
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
	http_count_reply(code);
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
	http_reply_object(req, status, o);
}

/* Reply with o as JSON, and put o. */
void
http_reply_object(struct evhttp_request *req, int code,
    struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

	if (s == NULL)
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
	else
		http_reply_json(req, code, s);
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

/*
 * Whether req carries the token (or none is configured); otherwise a 401
 * has been sent. Compared in constant time.
 */
int
http_authorized(struct evhttp_request *req)
{
	const char *token = sottod.cfg.http_token, *h;
	size_t i, n = strlen(token);
	unsigned char diff = 0;

	if (n == 0)
		return 1;
	h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Authorization");
	if (h != NULL && strncasecmp(h, "Bearer ", 7) == 0) {
		h += 7;
		while (*h == ' ')
			h++;
		diff = strlen(h) != n;
		for (i = 0; i < n && h[i] != '\0'; i++)
			diff |= (unsigned char)(h[i] ^ token[i]);
		if (diff == 0 && i == n)
			return 1;
	}
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "WWW-Authenticate", "Bearer realm=\"sottod\"");
	http_reply_error(req, 401, "invalid_request_error", "invalid_api_key",
	    "%s", h == NULL ? "no API key: send Authorization: Bearer TOKEN "
	    "([http] token of sottod.conf)" : "incorrect API key");
	return 0;
}

/* The Allow header's value for methods. */
static void
http_allow(int methods, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", methods & EVHTTP_REQ_GET ? "GET, " : "",
	    methods & EVHTTP_REQ_HEAD ? "HEAD, " : "",
	    methods & EVHTTP_REQ_POST ? "POST, " : "");
	if (strlen(buf) >= 2)
		buf[strlen(buf) - 2] = '\0';
}

/* The method, then the token; 0 when a reply has been sent. */
static int
http_route_check(struct evhttp_request *req, const struct http_route *r)
{
	char allow[32];

	if ((evhttp_request_get_command(req) & r->methods) == 0) {
		http_allow(r->methods, allow, sizeof(allow));
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", allow);
		http_reply_error(req, 405, "invalid_request_error",
		    "method_not_allowed", "%s takes %s, not %s", r->path,
		    allow, http_method_name(req));
		return 0;
	}
	return r->open || http_authorized(req);
}

/* For routes added elsewhere: GET or HEAD, else a 405 has been sent. */
int
http_want_get(struct evhttp_request *req)
{
	struct http_route r = { evhttp_request_get_uri(req),
	    EVHTTP_REQ_GET | EVHTTP_REQ_HEAD, 1, NULL };

	return http_route_check(req, &r);
}

static void
http_route_cb(struct evhttp_request *req, void *arg)
{
	const struct http_route *r = arg;

	if (http_route_check(req, r))
		r->fn(req);
}

/*
 * GET /health: 200 while the model is loaded, the compute thread runs
 * and sottod is not stopping; else 503. Load balancers poll it.
 */
static void
http_health(struct evhttp_request *req)
{
	struct json_object *o;
	const char *why = NULL;

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
	http_reply_object(req, why == NULL ? HTTP_OK : 503, o);
}

/* Paths of no route: /v1/models/ID, else 404. */
static void
http_notfound_cb(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req));
	static const struct http_route model = { "/v1/models/ID",
	    EVHTTP_REQ_GET | EVHTTP_REQ_HEAD, 0, NULL };

	if (path != NULL && strncmp(path, "/v1/models/", 11) == 0 &&
	    path[11] != '\0') {
		if (http_route_check(req, &model))
			http_model(req, path + 11);
		return;
	}
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
	return fd;
}

/* The address fd listens on, into http.addr and http.loopback. */
static void
http_bound(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		listen_addr_format((struct sockaddr *)&ss, http.addr,
		    sizeof(http.addr));
	http.loopback = listen_addr_loopback((struct sockaddr *)&ss);
}

int
http_start(int fd, char *err, size_t errlen)
{
	const char *addr = sottod.cfg.http_listen;
	struct timeval tv = { sottod.cfg.http_timeout_s, 0 };
	size_t i;

	if (fd != -1) {		/* socket activation: sottod-http.socket */
		if (*addr != '\0')
			log_info("http: the socket from systemd replaces "
			    "listen = %s", addr);
		(void)evutil_make_socket_nonblocking(fd);
		(void)evutil_make_socket_closeonexec(fd);
		addr = "the socket from systemd";
	} else if (*addr == '\0')
		return 0;
	else if ((fd = http_listen(addr, err, errlen)) == -1)
		return -1;
	http_bound(fd);
	if (!http.loopback && sottod.cfg.http_token[0] == '\0') {
		snprintf(err, errlen, "http: %s is not a loopback address: "
		    "set [http] token in the config, which clients then send "
		    "as Authorization: Bearer TOKEN", addr);
		close(fd);
		return -1;
	}
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
	evhttp_set_max_body_size(http.http,
	    (ev_ssize_t)sottod.cfg.http_max_request_bytes);
	evhttp_set_max_headers_size(http.http, HTTP_HEADERS_MAX);
	/* a 413 reaches the client after its body, not a reset */
	evhttp_set_flags(http.http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_timeout_tv(http.http, &tv);
	evhttp_set_bevcb(http.http, http_conn_bev, NULL);
	evhttp_set_gencb(http.http, http_notfound_cb, NULL);
	for (i = 0; i < sizeof(http_routes) / sizeof(http_routes[0]); i++)
		evhttp_set_cb(http.http, http_routes[i].path, http_route_cb,
		    (void *)&http_routes[i]);
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
	http_openai_stop();
	if (http.http != NULL)
		evhttp_free(http.http);
	memset(&http, 0, sizeof(http));
}
