/*
 * OpenAI's Realtime API in transcription mode: a WebSocket at
 * /v1/realtime?intent=transcription on the HTTP listener, for the
 * clients (the openai SDK, voice-agent frameworks) that speak it.
 *
 * The upgrade is checked as /ws's (net/ws-upgrade.c: Origin, Host, the
 * token as Authorization: Bearer, ?token=, or the browser's way, the
 * subprotocol "openai-insecure-api-key.TOKEN"), then the connection is
 * a peer with rt_ops: every limit of peer.c and session.c applies (idle
 * timeout, back-pressure, slow readers, max_sessions). Client events are
 * parsed by realtime-msg.c; audio, turns and items are realtime-turn.c's.
 * A client's mistake is an error event and the connection stays, as
 * OpenAI's does; a broken WebSocket, an error of the daemon's (busy,
 * shutdown) closes it after the error event.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "httpd.h"
#include "log.h"
#include "realtime-private.h"
#include "ws-upgrade.h"

/* One client event: a mistake in it is an error event, nothing more. */
static void
rt_io_message(void *arg, int binary, const uint8_t *buf, size_t len)
{
	struct rt_conn *c = arg;
	struct peer *p = c->ws.peer;
	struct rt_msg m;
	const char *code;
	char msg[PROTO_MSG_MAX];

	if (p->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	peer_timer(p);		/* the idle clock starts again */
	if (binary) {
		rt_send_error(c, "invalid_request_error", "invalid_event", NULL,
		    "events are JSON text messages; audio goes base64 in "
		    "input_audio_buffer.append");
		return;
	}
	if (rt_msg_parse(buf, len, &c->cfg, &m, &code, msg) != 0) {
		rt_send_error(c, "invalid_request_error", code, m.event_id, msg);
		return;
	}
	switch (m.type) {
	case RT_MSG_UPDATE:
		if (rt_configure(c, &m.cfg, msg) != 0)
			rt_send_error(c, "invalid_request_error",
			    "invalid_value", m.event_id, msg);
		else
			rt_send_session(c, 1);
		break;
	case RT_MSG_APPEND:
		c->err = PROTO_E_INTERNAL;
		if (rt_audio(c, m.audio, m.n_audio, msg) != 0 &&
		    !(p->flags & (PEER_DEAD | PEER_CLOSING)))
			peer_fail(p, c->err, "%s", msg);
		break;
	case RT_MSG_COMMIT:
		if (rt_commit(c, msg) != 0)
			rt_send_error(c, "invalid_request_error",
			    "input_audio_buffer_commit_empty", m.event_id, msg);
		break;
	case RT_MSG_CLEAR:
		rt_clear(c);
		break;
	}
	free(m.audio);
}

static const struct ws_conn_io rt_io = {
	.read = ws_peer_io_read,
	.write = ws_peer_io_write,
	.message = rt_io_message,
	.failed = ws_peer_io_failed,
	.unsent = ws_peer_io_unsent,
};

/*
 * ops->write: a session event, or an error of peer.c's; a daemon error
 * is the last thing sent, with the close frame that says the same.
 */
static void
rt_write(struct peer *p, const char *json)
{
	struct rt_conn *c = p->front;

	rt_session_event(c, json);
	ws_peer_close_on_error(c->ws.conn, json);
}

static void
rt_ended(struct peer *p)
{
	rt_session_ended(p->front);
}

static void
rt_free(struct peer *p)
{
	struct rt_conn *c = p->front;

	if (c == NULL)
		return;
	rt_free_items(c);
	source_client_free(c->src);
	sotto_vad_state_free(c->vad);
	ws_conn_free(c->ws.conn);
	free(c->g711);
	free(c->ring);
	free(c);
	p->front = NULL;
}

static const struct peer_ops rt_ops = {
	.name = "realtime",
	.read = ws_peer_read,
	.write = rt_write,
	.ended = rt_ended,
	.free = rt_free,
	.closing = ws_peer_closing,
	.drain = ws_peer_drain,
	.linger = 1,
};

/* Whether the query says intent=transcription (the only one served). */
static int
rt_intent(struct evhttp_request *req)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	struct evkeyvalq params;
	const char *v;
	int ok;

	if (q == NULL || evhttp_parse_query_str(q, &params) != 0)
		return 0;
	v = evhttp_find_header(&params, "intent");
	ok = v != NULL && strcmp(v, "transcription") == 0;
	evhttp_clear_headers(&params);
	return ok;
}

/* A new connection's state: the beta shape if the client asked for it. */
static struct rt_conn *
rt_conn_new(struct evhttp_request *req)
{
	const char *beta = evhttp_find_header(
	    evhttp_request_get_input_headers(req), "OpenAI-Beta");
	struct rt_conn *c;
	struct rt_config cfg;
	char msg[PROTO_MSG_MAX];

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	TAILQ_INIT(&c->items);
	rt_config_init(&cfg, core_vad() != NULL);
	cfg.beta = beta != NULL && strstr(beta, "realtime=v1") != NULL;
	if ((c->ws.conn = ws_conn_new(&rt_io, &c->ws,
	    core_config()->max_frame_bytes)) == NULL ||
	    rt_configure(c, &cfg, msg) != 0) {
		ws_conn_free(c->ws.conn);
		sotto_vad_state_free(c->vad);
		free(c->ring);
		free(c);
		return NULL;
	}
	return c;
}

/* GET /v1/realtime?intent=transcription: the upgrade, session.created. */
static void
rt_request(struct evhttp_request *req)
{
	char accept[WS_ACCEPT_KEY_BYTES];
	struct rt_conn *c;
	struct peer *p;
	int gone;

	if (ws_upgrade_check(req, accept) != 0)
		return;
	if (!rt_intent(req)) {
		httpd_reply_param_error(req, 400, "invalid_request_error",
		    "invalid_intent", "intent", "sottod serves transcription "
		    "sessions only: connect to /v1/realtime?intent="
		    "transcription");
		return;
	}
	if ((c = rt_conn_new(req)) == NULL) {
		httpd_reply_error(req, 503, "server_error", NULL,
		    "out of memory");
		return;
	}
	if ((p = ws_upgrade_take(req, accept, &rt_ops, c, &gone)) == NULL) {
		c->ws.peer = NULL;
		ws_conn_free(c->ws.conn);
		sotto_vad_state_free(c->vad);
		free(c->ring);
		free(c);
		return;
	}
	c->ws.peer = p;
	p->flags |= PEER_NO_RESUME | PEER_KEEP_SPEAKERS;
	p->state = PEER_READY;
	snprintf(c->id, sizeof(c->id), "sess_%llu", (unsigned long long)p->id);
	peer_timer(p);
	log_debug("peer %llu: Realtime transcription session",
	    (unsigned long long)p->id);
	rt_send_session(c, 0);
}

static const struct httpd_route rt_routes[] = {
	{ "/v1/realtime", EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT, 1, 0,
	    rt_request },
};

int
realtime_start(char *err, size_t errlen)
{
	if (!httpd_on())
		return 0;
	if (httpd_routes(rt_routes, 1) != 0) {
		snprintf(err, errlen, "realtime: cannot add /v1/realtime");
		return -1;
	}
	return 0;
}
