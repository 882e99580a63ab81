/*
 * A WebSocket upgrade on the HTTP listener, for the doors that speak
 * over one (daemon/ws, daemon/realtime, daemon/deepgram).
 *
 * The upgrade: evhttp parses the request and calls the door's route,
 * which checks it here (GET, Upgrade: websocket, version 13, a good key,
 * an Origin of the listener's own host, without a token a loopback Host,
 * the listener's token, room for one more connection) and then takes the
 * connection from evhttp for good: the socket is dup()ed into a peer of
 * its own (with the door's ops), the descriptor evhttp knows is pointed
 * at /dev/null (dup2), and evhttp frees its connection, closing only
 * that. libevent 2.1 has no call to detach a connection from evhttp
 * (2.2's evws does it inside evhttp); evhttp watches nothing on the
 * descriptor then (it stops reading before it calls a route, and has
 * nothing to write), so nothing of it reaches the socket afterwards.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "core.h"
#include "httpd.h"
#include "httpd-head.h"
#include "log.h"
#include "peer.h"
#include "ws-conn.h"
#include "ws-upgrade.h"

/* Whether header value v lists token t (comma-separated, any case). */
static int
ws_upgrade_has_token(const char *v, const char *t)
{
	size_t n = strlen(t);

	while (v != NULL && *v != '\0') {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		if (strncasecmp(v, t, n) == 0 && (v[n] == '\0' ||
		    v[n] == ',' || v[n] == ' ' || v[n] == '\t'))
			return 1;
		v = strchr(v, ',');
	}
	return 0;
}

/*
 * A browser sends the page's origin; only the page this listener served
 * (scheme http or https, the same host and port as Host) may connect.
 * Clients that are not browsers send no Origin.
 */
static int
ws_upgrade_origin_ok(const char *origin, const char *host)
{
	if (origin == NULL)
		return 1;
	if (host == NULL)
		return 0;
	if (strncasecmp(origin, "http://", 7) == 0)
		origin += 7;
	else if (strncasecmp(origin, "https://", 8) == 0)
		origin += 8;
	else
		return 0;
	return strcasecmp(origin, host) == 0;
}

/*
 * Without a token the listener is on a loopback address (httpd.c), and
 * only names of it may be in Host: a page whose name was made to point
 * at 127.0.0.1 (DNS rebinding) would otherwise be of "the same origin".
 */
static int
ws_upgrade_host_ok(const char *host)
{
	static const char *const names[] = { "localhost", "127.", "[::1]" };
	size_t i, n;

	if (core_config()->http_token[0] != '\0')
		return 1;
	if (host == NULL)
		return 0;
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		n = strlen(names[i]);
		if (strncasecmp(host, names[i], n) != 0)
			continue;
		if (names[i][n - 1] == '.')
			return strspn(host + n, "0123456789.:") ==
			    strlen(host + n);
		return host[n] == '\0' || (host[n] == ':' &&
		    strspn(host + n + 1, "0123456789") == strlen(host + n + 1));
	}
	return 0;
}

/* Whether t[len] is the token, compared in constant time. */
static int
ws_upgrade_token_is(const char *t, size_t len, const char *token)
{
	size_t i, n = strlen(token);
	unsigned char diff = len != n;

	for (i = 0; i < n; i++)
		diff |= (unsigned char)((i < len ? t[i] : 0) ^ token[i]);
	return diff == 0;
}

/*
 * The token as OpenAI's Realtime API takes it from a browser: one of the
 * subprotocols offered is "openai-insecure-api-key.TOKEN".
 */
static int
ws_upgrade_protocol_token(const char *v, const char *token)
{
	static const char prefix[] = "openai-insecure-api-key.";
	size_t n;

	while (v != NULL && *v != '\0') {
		while (*v == ' ' || *v == '\t' || *v == ',')
			v++;
		n = strcspn(v, ", \t");
		if (n > sizeof(prefix) - 1 && strncmp(v, prefix,
		    sizeof(prefix) - 1) == 0 && ws_upgrade_token_is(v +
		    sizeof(prefix) - 1, n - (sizeof(prefix) - 1), token))
			return 1;
		v += n;
	}
	return 0;
}

/*
 * The token as Deepgram takes it from a browser: the subprotocols
 * offered are "token" (or "bearer") and the TOKEN itself.
 */
static int
ws_upgrade_protocol_pair(const char *v, const char *token)
{
	const char *s = v;
	size_t n;

	if (!ws_upgrade_has_token(v, "token") && !ws_upgrade_has_token(v,
	    "bearer"))
		return 0;
	while (s != NULL && *s != '\0') {
		while (*s == ' ' || *s == '\t' || *s == ',')
			s++;
		n = strcspn(s, ", \t");
		if (n > 0 && ws_upgrade_token_is(s, n, token))
			return 1;
		s += n;
	}
	return 0;
}

/*
 * The listener's token: as for every route (Authorization: Bearer), as
 * Deepgram's clients send it (Authorization: Token), or, since a browser
 * cannot put headers on a WebSocket, as ?token= or as a subprotocol
 * (openai-insecure-api-key.TOKEN, or "token" and TOKEN). 0 when a 401
 * has been sent.
 */
static int
ws_upgrade_authorized(struct evhttp_request *req)
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *token = core_config()->http_token, *q, *t;
	const char *proto = evhttp_find_header(h, "Sec-WebSocket-Protocol");
	const char *auth = evhttp_find_header(h, "Authorization");
	struct evkeyvalq params;
	int ok = 0;

	if (token[0] != '\0' && (ws_upgrade_protocol_token(proto, token) ||
	    ws_upgrade_protocol_pair(proto, token) || (auth != NULL &&
	    httpd_head_scheme(auth, strlen(auth), "Token", token))))
		return 1;
	q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	if (token[0] == '\0' || q == NULL ||
	    evhttp_parse_query_str(q, &params) != 0)
		return httpd_authorized(req);
	if ((t = evhttp_find_header(&params, "token")) != NULL)
		ok = ws_upgrade_token_is(t, strlen(t), token);
	evhttp_clear_headers(&params);
	return ok || httpd_authorized(req);
}

/* Refuse the upgrade with the JSON error every route answers. */
static void
ws_upgrade_refuse(struct evhttp_request *req, int status, const char *code,
    const char *why)
{
	log_info("http: %s refused: %s", evhttp_request_get_uri(req), why);
	httpd_reply_error(req, status, status >= 500 ? "server_error" :
	    "invalid_request_error", code, "%s", why);
}

/* Check the upgrade request; 0, or -1 after answering it. */
int
ws_upgrade_check(struct evhttp_request *req, char accept[WS_ACCEPT_KEY_BYTES])
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *key = evhttp_find_header(h, "Sec-WebSocket-Key");
	const char *ver = evhttp_find_header(h, "Sec-WebSocket-Version");

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET ||
	    !ws_upgrade_has_token(evhttp_find_header(h, "Upgrade"), "websocket") ||
	    !ws_upgrade_has_token(evhttp_find_header(h, "Connection"), "upgrade")) {
		ws_upgrade_refuse(req, 426, "upgrade_required", "this is a "
		    "WebSocket: GET with Upgrade: websocket and Connection: "
		    "Upgrade");
		return -1;
	}
	if (ver == NULL || strcmp(ver, "13") != 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Sec-WebSocket-Version", "13");
		ws_upgrade_refuse(req, 426, "upgrade_required", "WebSocket "
		    "version 13 (RFC 6455) only");
		return -1;
	}
	if (key == NULL || ws_accept_key(key, accept) != 0) {
		ws_upgrade_refuse(req, 400, "bad_request", "Sec-WebSocket-Key "
		    "must be the base64 of 16 bytes");
		return -1;
	}
	if (!ws_upgrade_origin_ok(evhttp_find_header(h, "Origin"),
	    evhttp_find_header(h, "Host"))) {
		ws_upgrade_refuse(req, 403, "forbidden_origin", "a page from "
		    "another origin may not open it");
		return -1;
	}
	if (!ws_upgrade_host_ok(evhttp_find_header(h, "Host"))) {
		ws_upgrade_refuse(req, 403, "forbidden_host", "without [http] "
		    "token, a WebSocket answers only to Host: localhost or a "
		    "loopback address");
		return -1;
	}
	if (!ws_upgrade_authorized(req))
		return -1;
	if (core_draining()) {
		ws_upgrade_refuse(req, 503, "shutting_down", "sottod is stopping");
		return -1;
	}
	return 0;
}

/*
 * The doors that took connections over (at most WS_UPGRADE_DOORS kinds
 * of peers): their peers still count against [http] max_connections
 * and max_connections_per_address as the HTTP connections they were, so
 * the caps hold the WebSockets too (an upgrade moves a connection from
 * one count to the other and changes no total).
 */
#define WS_UPGRADE_DOORS	4
static const struct peer_ops *ws_upgrade_doors[WS_UPGRADE_DOORS];

static void
ws_upgrade_note(const struct peer_ops *ops)
{
	int i;

	for (i = 0; i < WS_UPGRADE_DOORS; i++) {
		if (ws_upgrade_doors[i] == ops)
			return;
		if (ws_upgrade_doors[i] == NULL) {
			ws_upgrade_doors[i] = ops;
			return;
		}
	}
	log_warnx("http: more than %d WebSocket doors: the connection caps "
	    "do not count the others", WS_UPGRADE_DOORS);
}

int
ws_upgrade_count(const char *addr)
{
	int i, n = 0;

	for (i = 0; i < WS_UPGRADE_DOORS && ws_upgrade_doors[i] != NULL; i++)
		n += addr != NULL ? peer_count_addr(ws_upgrade_doors[i],
		    addr) : peer_count_door(ws_upgrade_doors[i]);
	return n;
}

size_t
ws_peer_io_read(void *arg, uint8_t *buf, size_t len)
{
	struct ws_peer *w = arg;
	struct peer *p = w->peer;
	int n;

	if ((p->flags & (PEER_DEAD | PEER_CLOSING)) ||
	    ((p->flags & PEER_PAUSED) && !w->taking))
		return 0;
	n = evbuffer_remove(bufferevent_get_input(p->bev), buf, len);
	return n > 0 ? (size_t)n : 0;
}

int
ws_peer_io_write(void *arg, const uint8_t *buf, size_t len)
{
	struct ws_peer *w = arg;

	if (w->peer->flags & PEER_DEAD)
		return 0;
	return evbuffer_add(bufferevent_get_output(w->peer->bev), buf, len);
}

void
ws_peer_io_failed(void *arg, enum proto_error e, const char *msg)
{
	struct ws_peer *w = arg;

	peer_fail(w->peer, e, "%s", msg);
}

size_t
ws_peer_io_unsent(void *arg)
{
	const struct ws_peer *w = arg;

	if (w->peer->flags & PEER_DEAD)
		return 0;
	return evbuffer_get_length(bufferevent_get_output(w->peer->bev));
}

void
ws_peer_read(struct peer *p)
{
	struct ws_peer *w = p->front;

	if (p->flags & (PEER_DEAD | PEER_PAUSED))
		return;
	ws_conn_set_max_unsent(w->conn,
	    core_config()->max_client_buffer_bytes);
	if (ws_conn_recv(w->conn, core_now()) < 0 && !(p->flags & PEER_DEAD))
		peer_close_after_flush(p);
}

void
ws_peer_drain(struct peer *p)
{
	struct ws_peer *w = p->front;

	peer_take_unread(p);
	w->taking = 1;
	if (ws_conn_recv(w->conn, core_now()) < 0 && !(p->flags & PEER_DEAD))
		peer_close_after_flush(p);
	w->taking = 0;
}

void
ws_peer_closing(struct peer *p)
{
	struct ws_peer *w = p->front;

	if (core_draining())
		ws_conn_close(w->conn, WS_CLOSE_GOING_AWAY,
		    "sottod is stopping");
	else
		ws_conn_close(w->conn, WS_CLOSE_NORMAL, "");
}

void
ws_peer_close_on_error(struct ws_conn *conn, const char *json)
{
	enum proto_error e = proto_event_error_code(json);

	if (e != PROTO_OK)
		ws_conn_close(conn, ws_close_code(e), proto_error_name(e));
}

/*
 * Take the connection from evhttp: a descriptor of our own for the
 * socket, evhttp's pointed at /dev/null, evhttp's connection freed.
 * Returns the descriptor, or -1 (the request is then still evhttp's).
 */
static int
ws_upgrade_fd(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	/* the socket's bufferevent, under the listener's filter */
	struct bufferevent *sock = bufferevent_get_underlying(bev);
	int fd = bufferevent_getfd(bev), own, null;

	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0 ||
	    (sock != NULL && evbuffer_get_length(bufferevent_get_input(sock)) >
	    0))
		return -1;	/* frames before our 101: not a client */
	if ((own = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return -1;
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1) {
		close(own);
		return -1;
	}
	bufferevent_disable(bev, EV_READ | EV_WRITE);
	if (sock != NULL)
		bufferevent_disable(sock, EV_READ | EV_WRITE);
	if (dup2(null, fd) == -1) {
		close(null);
		close(own);
		return -1;
	}
	close(null);
	evhttp_connection_free(evcon);
	return own;
}

/*
 * Take the connection from evhttp and make it a peer with ops and front
 * (now the peer's: ops->free frees it), the 101 queued. Returns the
 * peer, or NULL: then req was answered (503) when *ret_gone is clear, or
 * the connection is gone (closed) when it is set; front is still the
 * caller's.
 */
struct peer *
ws_upgrade_take(struct evhttp_request *req, const char *accept,
    const struct peer_ops *ops, void *front, int *ret_gone)
{
	static const char *const chosen[] = { "realtime", "token", "bearer" };
	const char *offered = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "Sec-WebSocket-Protocol");
	const char *proto = NULL;
	struct peer *p;
	size_t i;
	int fd;

	*ret_gone = 0;
	/* a browser offering subprotocols wants one chosen: OpenAI's, or
	   the scheme of Deepgram's pair (never the token itself) */
	for (i = 0; proto == NULL && i < sizeof(chosen) / sizeof(chosen[0]);
	    i++)
		if (ws_upgrade_has_token(offered, chosen[i]))
			proto = chosen[i];
	if ((fd = ws_upgrade_fd(req)) == -1) {
		log_warnx("http: %s: cannot take the connection (out of "
		    "memory or descriptors)", evhttp_request_get_uri(req));
		ws_upgrade_refuse(req, 503, "unavailable", "cannot take "
		    "the connection");
		return NULL;
	}
	*ret_gone = 1;		/* the request went with evhttp's connection */
	ws_upgrade_note(ops);
	if ((p = peer_new(fd, -1, ops)) == NULL)
		return NULL;
	p->front = front;
	evbuffer_add_printf(bufferevent_get_output(p->bev),
	    "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\n"
	    "Connection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\n%s%s%s\r\n", accept,
	    proto != NULL ? "Sec-WebSocket-Protocol: " : "",
	    proto != NULL ? proto : "", proto != NULL ? "\r\n" : "");
	return p;
}
