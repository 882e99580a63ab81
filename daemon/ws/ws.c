/*
 * WebSocket clients at /ws on the HTTP listener: the browser's way in.
 *
 * The upgrade: evhttp parses the request and calls ws_request, which
 * checks it (GET, Upgrade: websocket, version 13, a good key, an Origin
 * of the page's own host, without a token a loopback Host, the
 * listener's token, room for one more connection) and then takes the
 * connection from evhttp for good: the socket is dup()ed into a peer of
 * its own (peer.c, with ws_ops), the descriptor evhttp knows is pointed
 * at /dev/null (dup2), and evhttp frees its connection, closing only
 * that. libevent 2.1 has no call to detach a connection from evhttp (2.2's
 * evws does it inside evhttp); evhttp watches nothing on the descriptor
 * then (it stops reading before it calls a route, and has nothing to
 * write), so nothing of it reaches the socket afterwards.
 *
 * The peer is like a socket client in the state after HELLO: its
 * messages become the socket protocol's frames (ws-msg.c) and go through
 * peer_dispatch, its events go out as text messages, and every limit of
 * peer.c and session.c applies (idle timeout, back-pressure, slow
 * readers). An error event is followed at once by a close frame with the
 * matching code (ws_close_code); a peer closing for another reason sends
 * 1000 (1001 while sottod stops). Then peer.c lingers: our side is shut
 * once all is written, and the client's answer is read until it closes.
 */
#include <ctype.h>
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

#include "http.h"
#include "log.h"
#include "sottod.h"
#include "ws.h"

/* The front door's state of a peer (p->front), owned by it. */
struct ws {
	struct peer		*peer;
	struct ws_conn		*conn;
};

static size_t
ws_io_read(void *arg, uint8_t *buf, size_t len)
{
	struct ws *w = arg;
	struct peer *p = w->peer;
	int n;

	if (p->flags & (PEER_DEAD | PEER_PAUSED | PEER_CLOSING))
		return 0;
	n = evbuffer_remove(bufferevent_get_input(p->bev), buf, len);
	return n > 0 ? (size_t)n : 0;
}

static int
ws_io_write(void *arg, const uint8_t *buf, size_t len)
{
	struct ws *w = arg;

	if (w->peer->flags & PEER_DEAD)
		return 0;
	return evbuffer_add(bufferevent_get_output(w->peer->bev), buf, len);
}

static void
ws_io_message(void *arg, int binary, const uint8_t *buf, size_t len)
{
	struct ws *w = arg;
	struct proto_frame f;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	if (w->peer->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	if ((e = ws_msg_frame(binary, buf, len, &f, msg)) != PROTO_OK)
		return peer_fail(w->peer, e, "%s", msg);
	peer_dispatch(w->peer, &f);
	peer_timer(w->peer);	/* the idle clock starts again */
}

/* The client broke the WebSocket protocol: its error event, then close. */
static void
ws_io_failed(void *arg, enum proto_error e, const char *msg)
{
	struct ws *w = arg;

	peer_fail(w->peer, e, "%s", msg);
}

static const struct ws_conn_io ws_io = {
	.read = ws_io_read,
	.write = ws_io_write,
	.message = ws_io_message,
	.failed = ws_io_failed,
};

/* ops->read: the frames that came; the client's close ends the peer. */
static void
ws_read(struct peer *p)
{
	struct ws *w = p->front;

	if (p->flags & (PEER_DEAD | PEER_PAUSED))
		return;
	if (ws_conn_recv(w->conn, sottod_now()) < 0 && !(p->flags & PEER_DEAD))
		peer_close_after_flush(p);
}

/* The error code of an error event, PROTO_OK for any other event. */
static enum proto_error
ws_event_error(const char *json)
{
	static const char prefix[] = "{\"type\":\"error\",\"code\":\"";
	size_t n;
	int e;

	if (strncmp(json, prefix, sizeof(prefix) - 1) != 0)
		return PROTO_OK;
	json += sizeof(prefix) - 1;
	for (e = PROTO_E_BAD_FRAME; e < 64; e++) {	/* past the last: "internal" */
		n = strlen(proto_error_name((enum proto_error)e));
		if (strncmp(json, proto_error_name((enum proto_error)e), n) ==
		    0 && json[n] == '"')
			return (enum proto_error)e;
	}
	return PROTO_E_INTERNAL;
}

/*
 * ops->write: one event as a text message; an error event is the last
 * thing sent, with the close frame that says the same right after it.
 */
static void
ws_write(struct peer *p, const char *json)
{
	struct ws *w = p->front;
	enum proto_error e = ws_event_error(json);

	(void)ws_conn_send_text(w->conn, json, strlen(json));
	if (e != PROTO_OK)
		ws_conn_close(w->conn, ws_close_code(e), proto_error_name(e));
}

/* ops->closing: a close frame, unless one went out already. */
static void
ws_closing(struct peer *p)
{
	struct ws *w = p->front;

	if (sottod.draining)
		ws_conn_close(w->conn, WS_CLOSE_GOING_AWAY, "sottod is stopping");
	else
		ws_conn_close(w->conn, WS_CLOSE_NORMAL, "");
}

static void
ws_free(struct peer *p)
{
	struct ws *w = p->front;

	if (w == NULL)
		return;
	ws_conn_free(w->conn);
	free(w);
	p->front = NULL;
}

static const struct peer_ops ws_ops = {
	.name = "ws",
	.read = ws_read,
	.write = ws_write,
	.free = ws_free,
	.closing = ws_closing,
};

/* Whether header value v lists token t (comma-separated, any case). */
static int
ws_has_token(const char *v, const char *t)
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
ws_origin_ok(const char *origin, const char *host)
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
 * Without a token the listener is on a loopback address (http.c), and
 * only names of it may be in Host: a page whose name was made to point
 * at 127.0.0.1 (DNS rebinding) would otherwise be of "the same origin".
 */
static int
ws_host_ok(const char *host)
{
	static const char *const names[] = { "localhost", "127.", "[::1]" };
	size_t i, n;

	if (sottod.cfg.http_token[0] != '\0')
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

/*
 * The listener's token: as for every route (Authorization: Bearer), or,
 * since a browser cannot put headers on a WebSocket, as ?token=. 0 when
 * a 401 has been sent.
 */
static int
ws_authorized(struct evhttp_request *req)
{
	const char *token = sottod.cfg.http_token, *q, *t;
	struct evkeyvalq params;
	size_t i, n = strlen(token);
	unsigned char diff;
	int ok = 0;

	q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	if (n == 0 || q == NULL || evhttp_parse_query_str(q, &params) != 0)
		return http_authorized(req);
	if ((t = evhttp_find_header(&params, "token")) != NULL) {
		diff = strlen(t) != n;
		for (i = 0; i < n && t[i] != '\0'; i++)
			diff |= (unsigned char)(t[i] ^ token[i]);
		ok = diff == 0 && i == n;
	}
	evhttp_clear_headers(&params);
	return ok || http_authorized(req);
}

static void
ws_refuse(struct evhttp_request *req, int code, const char *reason,
    const char *why)
{
	struct evbuffer *body = evbuffer_new();

	log_info("http: /ws refused: %s", why);
	if (body != NULL)
		evbuffer_add_printf(body, "%s\n", why);
	evhttp_add_header(evhttp_request_get_output_headers(req),
	    "Content-Type", "text/plain; charset=utf-8");
	evhttp_send_reply(req, code, reason, body);
	if (body != NULL)
		evbuffer_free(body);
}

/* Check the upgrade request; 0, or -1 after answering it. */
static int
ws_check(struct evhttp_request *req, char accept[WS_ACCEPT_KEY_BYTES])
{
	struct evkeyvalq *h = evhttp_request_get_input_headers(req);
	const char *key = evhttp_find_header(h, "Sec-WebSocket-Key");
	const char *ver = evhttp_find_header(h, "Sec-WebSocket-Version");

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET ||
	    !ws_has_token(evhttp_find_header(h, "Upgrade"), "websocket") ||
	    !ws_has_token(evhttp_find_header(h, "Connection"), "upgrade")) {
		ws_refuse(req, 426, "Upgrade Required", "/ws is a WebSocket: "
		    "GET with Upgrade: websocket and Connection: Upgrade");
		return -1;
	}
	if (ver == NULL || strcmp(ver, "13") != 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "Sec-WebSocket-Version", "13");
		ws_refuse(req, 426, "Upgrade Required", "WebSocket version 13 "
		    "(RFC 6455) only");
		return -1;
	}
	if (key == NULL || ws_accept_key(key, accept) != 0) {
		ws_refuse(req, 400, "Bad Request", "Sec-WebSocket-Key must "
		    "be the base64 of 16 bytes");
		return -1;
	}
	if (!ws_origin_ok(evhttp_find_header(h, "Origin"),
	    evhttp_find_header(h, "Host"))) {
		ws_refuse(req, 403, "Forbidden", "a page from another origin "
		    "may not open /ws");
		return -1;
	}
	if (!ws_host_ok(evhttp_find_header(h, "Host"))) {
		ws_refuse(req, 403, "Forbidden", "without [http] token, /ws "
		    "answers only to Host: localhost or a loopback address");
		return -1;
	}
	if (!ws_authorized(req))
		return -1;
	if (sottod.draining) {
		ws_refuse(req, 503, "Service Unavailable", "sottod is "
		    "stopping");
		return -1;
	}
	if (server_full()) {
		ws_refuse(req, 503, "Service Unavailable", "too many "
		    "connections");
		return -1;
	}
	return 0;
}

/*
 * Take the connection from evhttp: a descriptor of our own for the
 * socket, evhttp's pointed at /dev/null, evhttp's connection freed.
 * Returns the descriptor, or -1 (the request is then still evhttp's).
 */
static int
ws_take(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev = evhttp_connection_get_bufferevent(evcon);
	int fd = bufferevent_getfd(bev), own, null;

	if (evbuffer_get_length(bufferevent_get_input(bev)) > 0)
		return -1;	/* frames before our 101: not a client */
	if ((own = fcntl(fd, F_DUPFD_CLOEXEC, 0)) == -1)
		return -1;
	if ((null = open("/dev/null", O_RDWR | O_CLOEXEC)) == -1) {
		close(own);
		return -1;
	}
	bufferevent_disable(bev, EV_READ | EV_WRITE);
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
 * Answer 101 on the taken socket and make it a peer. Returns the peer,
 * or NULL with *ret_gone set when the connection was taken (and is now
 * closed) or clear when it is still evhttp's to answer.
 */
static struct peer *
ws_upgrade(struct evhttp_request *req, const char *accept, int *ret_gone)
{
	struct ws *w;
	struct peer *p;
	int fd;

	*ret_gone = 0;
	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	if ((w->conn = ws_conn_new(&ws_io, w, sottod.cfg.max_frame_bytes)) ==
	    NULL || (fd = ws_take(req)) == -1) {
		ws_conn_free(w->conn);
		free(w);
		return NULL;
	}
	*ret_gone = 1;		/* the request went with evhttp's connection */
	if ((p = peer_new(fd, -1, &ws_ops)) == NULL) {
		ws_conn_free(w->conn);
		free(w);
		return NULL;
	}
	w->peer = p;
	p->front = w;
	p->state = PEER_READY;
	peer_timer(p);
	evbuffer_add_printf(bufferevent_get_output(p->bev),
	    "HTTP/1.1 101 Switching Protocols\r\n"
	    "Upgrade: websocket\r\n"
	    "Connection: Upgrade\r\n"
	    "Sec-WebSocket-Accept: %s\r\n\r\n", accept);
	return p;
}

/* GET /ws: the upgrade, then a hello event as after HELLO. */
void
ws_request(struct evhttp_request *req)
{
	char accept[WS_ACCEPT_KEY_BYTES], origin[128], *ev;
	const char *h;
	struct peer *p;
	int gone;

	if (ws_check(req, accept) != 0)
		return;
	h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Origin");
	snprintf(origin, sizeof(origin), "%s", h != NULL ? h : "none");
	if ((p = ws_upgrade(req, accept, &gone)) == NULL) {
		log_warnx("http: /ws: cannot take the connection (out of "
		    "memory or descriptors)");
		if (!gone)
			ws_refuse(req, 503, "Service Unavailable", "cannot "
			    "take the connection");
		return;
	}
	log_debug("peer %llu: WebSocket (Origin %s)",
	    (unsigned long long)p->id, origin);
	ev = proto_event_hello(SOTTOD_SERVER_NAME, sottod.model_name);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
}
