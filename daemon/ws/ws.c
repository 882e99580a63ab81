/*
 * WebSocket clients at /ws on the HTTP listener: the browser's way in.
 * The upgrade is checked and the connection taken from evhttp by
 * daemon/net/ws-upgrade.c; from then on it is a peer with ws_ops.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "core.h"
#include "httpd.h"
#include "log.h"
#include "peer.h"
#include "ws-conn.h"
#include "ws-upgrade.h"
#include "ws.h"

/* The front door's state of a peer (p->front) is a struct ws_peer. */

static void
ws_io_message(void *arg, int binary, const uint8_t *buf, size_t len)
{
	struct ws_peer *w = arg;
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

static const struct ws_conn_io ws_io = {
	.read = ws_peer_io_read,
	.write = ws_peer_io_write,
	.message = ws_io_message,
	.failed = ws_peer_io_failed,
	.unsent = ws_peer_io_unsent,
};

/*
 * ops->write: one event as a text message; an error event is the last
 * thing sent, with the close frame that says the same right after it.
 */
static void
ws_write(struct peer *p, const char *json)
{
	struct ws_peer *w = p->front;

	(void)ws_conn_send_text(w->conn, json, strlen(json));
	ws_peer_close_on_error(w->conn, json);
}

static void
ws_free(struct peer *p)
{
	struct ws_peer *w = p->front;

	if (w == NULL)
		return;
	ws_conn_free(w->conn);
	free(w);
	p->front = NULL;
}

static const struct peer_ops ws_ops = {
	.name = "ws",
	.read = ws_peer_read,
	.write = ws_write,
	.free = ws_free,
	.closing = ws_peer_closing,
	.drain = ws_peer_drain,
	.linger = 1,
};

/* GET /ws: the upgrade, then a hello event as after HELLO. */
static void
ws_request(struct evhttp_request *req)
{
	char accept[WS_ACCEPT_KEY_BYTES], origin[128], *ev;
	const char *h;
	struct ws_peer *w;
	struct peer *p;
	int gone;

	if (ws_upgrade_check(req, accept) != 0)
		return;
	h = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Origin");
	snprintf(origin, sizeof(origin), "%s", h != NULL ? h : "none");
	if ((w = calloc(1, sizeof(*w))) == NULL ||
	    (w->conn = ws_conn_new(&ws_io, w,
	    core_config()->max_frame_bytes)) == NULL) {
		free(w);
		httpd_reply_error(req, 503, "server_error", NULL,
		    "out of memory");
		return;
	}
	if ((p = ws_upgrade_take(req, accept, &ws_ops, w, &gone)) == NULL) {
		ws_conn_free(w->conn);
		free(w);
		return;
	}
	w->peer = p;
	p->state = PEER_READY;
	peer_timer(p);
	log_debug("peer %llu: WebSocket (Origin %s)",
	    (unsigned long long)p->id, origin);
	ev = proto_event_hello(SOTTOD_SERVER_NAME, core_model_name());
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
}

/* The upgrade is GET, and the token may come as ?token=: checked there. */
static const struct httpd_route ws_routes[] = {
	{ "/ws", EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT, 1, 0,
	    ws_request },
};

int
ws_start(char *err, size_t errlen)
{
	if (!httpd_on())
		return 0;
	if (httpd_routes(ws_routes, 1) != 0) {
		snprintf(err, errlen, "ws: cannot add /ws");
		return -1;
	}
	return 0;
}
