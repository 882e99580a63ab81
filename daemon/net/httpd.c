/*
 * The HTTP listener (docs/http.md): libevent's evhttp on the loop
 * thread, off unless [http] listen or --http names an address. The doors
 * on it (daemon/http: the OpenAI API and the page; daemon/ws: the
 * WebSocket) add their routes (httpd_routes); a path no route takes is
 * a 404. Every error is a JSON body shaped like OpenAI's:
 * {"error": {"message": ..., "type": ..., "code": ...}}.
 *
 * Access: with [http] token set, every route but /health wants
 * "Authorization: Bearer TOKEN" (401 otherwise); a listener on anything
 * but a loopback address refuses to start without a token.
 *
 * Limits: each connection (httpd-conn.c) is counted against
 * [http] max_connections and max_connections_per_address, its request
 * line and headers must come within header_timeout_seconds and its body
 * at min_body_bytes_per_second, and its header block is checked before
 * evhttp reads the body (httpd-head.c: the token, Expect, framing).
 * evhttp refuses a body over max_request_bytes (413) and a request whose
 * headers are over HTTP_HEADERS_MAX (400), with JSON bodies
 * (httpd-page.c), and drops a connection idle for
 * request_timeout_seconds while it reads a request or writes a reply.
 * accept(2) out of descriptors pauses the listener (httpd-listen.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <json-c/json.h>

#include "core.h"
#include "httpd.h"
#include "httpd-head.h"
#include "httpd-private.h"
#include "listen-addr.h"
#include "log.h"

#define HTTP_HEADERS_MAX	(16 * 1024)
#define HTTP_PREFIX_MAX		8
#define HTTP_OPEN_MAX		8

static uint64_t	http_replies[3];	/* 2xx (and others), 4xx, 5xx */

void
httpd_count_reply(int code)
{
	http_replies[code >= 500 ? 2 : code >= 400 ? 1 : 0]++;
}

void
httpd_reply_counts(uint64_t counts[3])
{
	memcpy(counts, http_replies, sizeof(http_replies));
}

static struct {
	struct evhttp			*http;
	struct evhttp_bound_socket	*bound;
	char				 addr[LISTEN_ADDR_MAX + 8];
	int				 loopback;
	/* routes for every path under a prefix ("/v1/models/") */
	const struct httpd_route	*prefix[HTTP_PREFIX_MAX];
	int				 n_prefix;
	/* paths of routes that need no token, for httpd-head.c */
	const char			*open[HTTP_OPEN_MAX + 1];
	int				 n_open;
} http;

/*
 * Every status sottod sends, with its reason phrase (RFC 9110): evhttp
 * 2.1 knows no 429, and calls it "Client Error".
 */
static const struct {
	int		 status;
	const char	*reason;
} httpd_reasons[] = {
	{ 200, "OK" }, { 400, "Bad Request" }, { 401, "Unauthorized" },
	{ 403, "Forbidden" }, { 404, "Not Found" },
	{ 405, "Method Not Allowed" }, { 408, "Request Timeout" },
	{ 413, "Content Too Large" }, { 417, "Expectation Failed" },
	{ 426, "Upgrade Required" }, { 429, "Too Many Requests" },
	{ 500, "Internal Server Error" }, { 501, "Not Implemented" },
	{ 503, "Service Unavailable" },
};

const char *
httpd_reason(int status)
{
	size_t i;

	for (i = 0; i < sizeof(httpd_reasons) / sizeof(httpd_reasons[0]); i++)
		if (httpd_reasons[i].status == status)
			return httpd_reasons[i].reason;
	return status >= 500 ? "Server Error" : status >= 400 ?
	    "Client Error" : "OK";
}

const char *const *
httpd_open_paths(void)
{
	return http.open;
}

int
httpd_on(void)
{
	return http.http != NULL;
}

/* Reply with json (a JSON object's text) and status code. */
void
httpd_reply_json(struct evhttp_request *req, int code, const char *json)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *b = evbuffer_new();

	evhttp_add_header(h, "Content-Type", "application/json");
	httpd_count_reply(code);
	if (b != NULL)
		evbuffer_add_printf(b, "%s\n", json);
	evhttp_send_reply(req, code, httpd_reason(code), b);
	if (b != NULL)
		evbuffer_free(b);
}

char *
httpd_error_json(const char *type, const char *code, const char *param,
    const char *msg)
{
	struct json_object *o, *e;
	const char *s;
	char *ret = NULL;

	o = json_object_new_object();
	e = json_object_new_object();
	if (o == NULL || e == NULL) {
		json_object_put(o);
		json_object_put(e);
		return NULL;
	}
	json_object_object_add(e, "message", json_object_new_string(msg));
	json_object_object_add(e, "type", json_object_new_string(type));
	json_object_object_add(e, "param", param != NULL ?
	    json_object_new_string(param) : NULL);
	json_object_object_add(e, "code", code != NULL ?
	    json_object_new_string(code) : NULL);
	json_object_object_add(o, "error", e);
	if ((s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
	    JSON_C_TO_STRING_NOSLASHESCAPE)) != NULL)
		ret = strdup(s);
	json_object_put(o);
	return ret;
}

static void
httpd_reply_verror(struct evhttp_request *req, int status, const char *type,
    const char *code, const char *param, const char *fmt, va_list ap)
{
	char msg[512], *json;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	log_debug("http: %s %s: %d %s", httpd_method_name(req),
	    evhttp_request_get_uri(req), status, msg);
	if ((json = httpd_error_json(type, code, param, msg)) == NULL) {
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
		return;
	}
	httpd_reply_json(req, status, json);
	free(json);
}

/*
 * An OpenAI-style error: type is invalid_request_error, authentication_
 * error, server_error...; code may be NULL.
 */
void
httpd_reply_error(struct evhttp_request *req, int status, const char *type,
    const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	httpd_reply_verror(req, status, type, code, NULL, fmt, ap);
	va_end(ap);
}

void
httpd_reply_param_error(struct evhttp_request *req, int status,
    const char *type, const char *code, const char *param,
    const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	httpd_reply_verror(req, status, type, code, param, fmt, ap);
	va_end(ap);
}

/* Reply with o as JSON, and put o. */
void
httpd_reply_object(struct evhttp_request *req, int code,
    struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(o,
	    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);

	if (s == NULL)
		evhttp_send_error(req, HTTP_INTERNAL, NULL);
	else
		httpd_reply_json(req, code, s);
	json_object_put(o);
}

struct event *
httpd_watch_close(struct evhttp_request *req,
    void (*fn)(evutil_socket_t, short, void *), void *arg)
{
	struct evhttp_connection *evcon;
	struct bufferevent *bev;
	struct event *ev;
	evutil_socket_t fd;

	if (!(event_base_get_features(core_base()) & EV_FEATURE_EARLY_CLOSE) ||
	    (evcon = evhttp_request_get_connection(req)) == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL ||
	    (fd = bufferevent_getfd(bev)) < 0 ||
	    (ev = event_new(core_base(), fd, EV_CLOSED, fn, arg)) == NULL)
		return NULL;
	if (event_add(ev, NULL) != 0) {
		event_free(ev);
		return NULL;
	}
	return ev;
}

const char *
httpd_method_name(struct evhttp_request *req)
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
httpd_authorized(struct evhttp_request *req)
{
	const char *token = core_config()->http_token, *h;

	if (token[0] == '\0')
		return 1;
	h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Authorization");
	if (h != NULL && httpd_head_bearer(h, strlen(h), token))
		return 1;
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "WWW-Authenticate", "Bearer realm=\"sottod\"");
	httpd_reply_error(req, 401, "invalid_request_error", "invalid_api_key",
	    "%s", h == NULL ? "no API key: send Authorization: Bearer TOKEN "
	    "([http] token of sottod.conf)" : "incorrect API key");
	return 0;
}

/* The Allow header's value for methods. */
static void
httpd_allow(int methods, char *buf, size_t len)
{
	snprintf(buf, len, "%s%s%s", methods & EVHTTP_REQ_GET ? "GET, " : "",
	    methods & EVHTTP_REQ_HEAD ? "HEAD, " : "",
	    methods & EVHTTP_REQ_POST ? "POST, " : "");
	if (strlen(buf) >= 2)
		buf[strlen(buf) - 2] = '\0';
}

/* The method, then the token; 0 when a reply has been sent. */
static int
httpd_route_check(struct evhttp_request *req, const struct httpd_route *r)
{
	char allow[32];

	if ((evhttp_request_get_command(req) & r->methods) == 0) {
		httpd_allow(r->methods, allow, sizeof(allow));
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Allow", allow);
		httpd_reply_error(req, 405, "invalid_request_error",
		    "method_not_allowed", "%s takes %s, not %s", r->path,
		    allow, httpd_method_name(req));
		return 0;
	}
	return r->open || httpd_authorized(req);
}

static void
httpd_route_cb(struct evhttp_request *req, void *arg)
{
	const struct httpd_route *r = arg;

	httpd_conn_request(req);
	if (httpd_route_check(req, r))
		r->fn(req);
}

/* Paths no route has: a route of a prefix they start with, else 404. */
static void
httpd_notfound_cb(struct evhttp_request *req, void *arg)
{
	const char *path = evhttp_uri_get_path(evhttp_request_get_evhttp_uri(
	    req));
	const struct httpd_route *r;
	size_t n;
	int i;

	httpd_conn_request(req);
	for (i = 0; path != NULL && i < http.n_prefix; i++) {
		r = http.prefix[i];
		n = strlen(r->path);
		if (strncmp(path, r->path, n) == 0 && path[n] != '\0') {
			if (httpd_route_check(req, r))
				r->fn(req);
			return;
		}
	}
	httpd_reply_error(req, HTTP_NOTFOUND, "invalid_request_error",
	    "not_found", "no such endpoint: %s %s", httpd_method_name(req),
	    evhttp_request_get_uri(req));
}

int
httpd_routes(const struct httpd_route *routes, size_t n)
{
	size_t i;

	if (http.http == NULL)
		return 0;
	for (i = 0; i < n; i++) {
		if (routes[i].open && !routes[i].prefix) {
			if (http.n_open == HTTP_OPEN_MAX)
				return -1;
			http.open[http.n_open++] = routes[i].path;
		}
		if (routes[i].prefix) {
			if (http.n_prefix == HTTP_PREFIX_MAX)
				return -1;
			http.prefix[http.n_prefix++] = &routes[i];
		} else if (evhttp_set_cb(http.http, routes[i].path,
		    httpd_route_cb, (void *)&routes[i]) != 0)
			return -1;
	}
	return 0;
}

/* The address fd listens on, into http.addr and http.loopback. */
static void
httpd_bound(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	memset(&ss, 0, sizeof(ss));
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		listen_addr_format((struct sockaddr *)&ss, http.addr,
		    sizeof(http.addr));
	http.loopback = listen_addr_loopback((struct sockaddr *)&ss);
}

static void	httpd_drain(void);
static void	httpd_stop(void);

static const struct door httpd_door = {
	.name = "http listener",
	.drain = httpd_drain,
	.stop = httpd_stop,
};

int
httpd_start(int fd, char *err, size_t errlen)
{
	const char *addr = core_config()->http_listen;
	struct timeval tv = { core_config()->http_timeout_s, 0 };

	if (fd != -1) {		/* socket activation: sottod-http.socket */
		if (*addr != '\0')
			log_info("http: the socket from systemd replaces "
			    "listen = %s", addr);
		(void)evutil_make_socket_nonblocking(fd);
		(void)evutil_make_socket_closeonexec(fd);
		addr = "the socket from systemd";
	} else if (*addr == '\0')
		return 0;
	else if ((fd = httpd_listen_open(addr, err, errlen)) == -1)
		return -1;
	httpd_bound(fd);
	if (!http.loopback && core_config()->http_token[0] == '\0') {
		snprintf(err, errlen, "http: %s is not a loopback address: "
		    "set [http] token in the config, which clients then send "
		    "as Authorization: Bearer TOKEN", addr);
		close(fd);
		return -1;
	}
	if ((http.http = evhttp_new(core_base())) == NULL) {
		snprintf(err, errlen, "http: cannot set up the server");
		close(fd);
		return -1;
	}
	if ((http.bound = httpd_listen_bind(http.http, fd)) == NULL) {
		snprintf(err, errlen, "http: cannot set up the listener");
		return -1;
	}
	/* Every method reaches a route, which answers 405 with JSON. */
	evhttp_set_allowed_methods(http.http, EVHTTP_REQ_GET |
	    EVHTTP_REQ_HEAD | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS | EVHTTP_REQ_TRACE |
	    EVHTTP_REQ_CONNECT | EVHTTP_REQ_PATCH);
	evhttp_set_default_content_type(http.http, "application/json");
	evhttp_set_max_body_size(http.http,
	    (ev_ssize_t)core_config()->http_max_request_bytes);
	evhttp_set_max_headers_size(http.http, HTTP_HEADERS_MAX);
	/* a 413 reaches the client after its body, not a reset */
	evhttp_set_flags(http.http, EVHTTP_SERVER_LINGERING_CLOSE);
	evhttp_set_timeout_tv(http.http, &tv);
	evhttp_set_bevcb(http.http, httpd_conn_bev, NULL);
	evhttp_set_gencb(http.http, httpd_notfound_cb, NULL);
	core_door_add(&httpd_door);
	log_info("http: listening on %s", http.addr);
	return 0;
}

/* SIGTERM: take no new connections; requests in progress finish. */
static void
httpd_drain(void)
{
	httpd_listen_stop();
	if (http.bound != NULL) {
		evhttp_del_accept_socket(http.http, http.bound);
		http.bound = NULL;
	}
}

static void
httpd_stop(void)
{
	httpd_listen_stop();
	if (http.http != NULL)
		evhttp_free(http.http);
	memset(&http, 0, sizeof(http));
}
