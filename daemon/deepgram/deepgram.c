/*
 * Deepgram's live transcription API: a WebSocket at /v1/listen on the
 * HTTP listener, for the clients (deepgram-sdk, voice agents) that
 * speak it.
 *
 * The upgrade is checked as the other WebSockets' (net/ws-upgrade.c:
 * Origin, Host, the token as Authorization: Token or Bearer, ?token=, or
 * the browser's subprotocol pair "token", TOKEN), then the query string
 * (deepgram-query.c): a bad value is a 400 before the upgrade, as
 * Deepgram answers it, and so is a language the model lacks. The
 * connection is then a peer with dg_ops, so every limit of peer.c and
 * session.c applies (idle timeout, which KeepAlive resets; back-pressure;
 * slow readers; max_sessions). A client's bad text message is an Error
 * message and the connection stays; an error of the session or the
 * daemon (busy, shutdown) closes it after the Error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/random.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "deepgram-private.h"
#include "httpd.h"
#include "log.h"
#include "ws-upgrade.h"

/* Binary: audio. Text: KeepAlive, Finalize or CloseStream. */
static void
dg_io_message(void *arg, int binary, const uint8_t *buf, size_t len)
{
	struct dg_conn *c = arg;
	struct peer *p = c->ws.peer;
	enum dg_msg_type t;
	char msg[PROTO_MSG_MAX];

	if (p->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	peer_timer(p);		/* the idle clock starts again (KeepAlive) */
	if (binary) {
		c->err = PROTO_E_INTERNAL;
		if (dg_audio(c, buf, len, msg) != 0 &&
		    !(p->flags & (PEER_DEAD | PEER_CLOSING)))
			peer_fail(p, c->err, "%s", msg);
		return;
	}
	if (dg_msg_parse(buf, len, &t, msg) != 0) {
		dg_send_error(c, "SchemaError", msg);
		return;
	}
	if (t == DG_MSG_FINALIZE)
		dg_finalize(c, DG_END_FINALIZE);
	else if (t == DG_MSG_CLOSE_STREAM)
		dg_finalize(c, DG_END_CLOSE);
}

static const struct ws_conn_io dg_io = {
	.read = ws_peer_io_read,
	.write = ws_peer_io_write,
	.message = dg_io_message,
	.failed = ws_peer_io_failed,
	.unsent = ws_peer_io_unsent,
};

/*
 * ops->write: a session event, or an error of peer.c's; an error is the
 * last thing sent, with the close frame that says the same.
 */
static void
dg_write(struct peer *p, const char *json)
{
	struct dg_conn *c = p->front;

	dg_session_event(c, json);
	ws_peer_close_on_error(c->ws.conn, json);
}

static void
dg_ended(struct peer *p)
{
	dg_session_over(p->front);
}

static void
dg_conn_free(struct dg_conn *c)
{
	dg_conn_free_audio(c);
	ws_conn_free(c->ws.conn);
	free(c);
}

static void
dg_free(struct peer *p)
{
	if (p->front == NULL)
		return;
	dg_conn_free(p->front);
	p->front = NULL;
}

static const struct peer_ops dg_ops = {
	.name = "deepgram",
	.read = ws_peer_read,
	.write = dg_write,
	.ended = dg_ended,
	.free = dg_free,
	.closing = ws_peer_closing,
	.drain = ws_peer_drain,
	.linger = 1,
};

/* A request id as Deepgram's: a random (version 4) UUID. */
void
dg_request_id(char out[DG_ID_MAX])
{
	uint8_t b[16] = { 0 };

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		log_warnx("deepgram: getrandom failed: request id not random");
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
	snprintf(out, DG_ID_MAX, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
	    "%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5],
	    b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

void
dg_created(char out[32])
{
	struct tm tm;
	time_t now = time(NULL);

	gmtime_r(&now, &tm);
	strftime(out, 32, "%Y-%m-%dT%H:%M:%S.000Z", &tm);
}

static struct dg_conn *
dg_conn_new(const struct dg_params *prm)
{
	struct dg_conn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->prm = *prm;
	dg_request_id(c->request_id);
	dg_created(c->created);
	sha256_init(&c->sha);
	if ((c->ws.conn = ws_conn_new(&dg_io, &c->ws,
	    core_config()->max_frame_bytes)) == NULL) {
		free(c);
		return NULL;
	}
	return c;
}

/* Refuse the upgrade as Deepgram does: {err_code, err_msg, request_id}. */
void
dg_refuse(struct evhttp_request *req, int status, const char *code,
    const char *msg)
{
	struct json_object *o = json_object_new_object();
	char id[DG_ID_MAX];

	dg_request_id(id);
	log_info("http: %s refused: %s", evhttp_request_get_uri(req), msg);
	json_object_object_add(o, "err_code", json_object_new_string(code));
	json_object_object_add(o, "err_msg", json_object_new_string(msg));
	json_object_object_add(o, "request_id", json_object_new_string(id));
	httpd_reply_object(req, status, o);
}

/* The query and the language, before the upgrade: 0, or a 400 sent. */
int
dg_check(struct evhttp_request *req, struct dg_params *prm)
{
	const char *q = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
	const char *param;
	char msg[PROTO_MSG_MAX + 16], why[PROTO_MSG_MAX];

	if (dg_query_parse(q, prm, &param, msg) != 0) {
		dg_refuse(req, 400, "Bad Request", msg);
		return -1;
	}
	if (session_check_language(prm->language, why) != 0) {
		snprintf(msg, sizeof(msg), "language: %s", why);
		dg_refuse(req, 400, "Bad Request", msg);
		return -1;
	}
	return 0;
}

/*
 * diarize: the speaker model loads (sottod keeps it for the sessions),
 * or the upgrade is refused as the pre-recorded door refuses: a 503
 * saying what to fetch. 0, or -1 with the refusal sent.
 */
static int
dg_speakers_check(struct evhttp_request *req, const struct dg_params *prm)
{
	const struct sotto_speaker *spk;
	const struct sotto_vad *vad;
	char err[1024];

	if (!prm->diarize || core_speakers(&spk, &vad, err, sizeof(err)) == 0)
		return 0;
	dg_refuse(req, 503, "SERVICE_UNAVAILABLE", err);
	return -1;
}

/* GET /v1/listen?...: the upgrade, then audio and results. */
static void
dg_request(struct evhttp_request *req)
{
	char accept[WS_ACCEPT_KEY_BYTES];
	struct dg_params prm;
	struct dg_conn *c;
	struct peer *p;
	int gone;

	if (evhttp_request_get_command(req) == EVHTTP_REQ_POST) {
		dg_file_request(req);	/* pre-recorded audio */
		return;
	}
	if (ws_upgrade_check(req, accept) != 0 || dg_check(req, &prm) != 0 ||
	    dg_speakers_check(req, &prm) != 0)
		return;
	if (session_count() >= core_config()->max_sessions) {
		dg_refuse(req, 429, "TOO_MANY_REQUESTS", "all sessions of "
		    "sottod are in use (max_sessions): try again later");
		return;
	}
	if ((c = dg_conn_new(&prm)) == NULL) {
		dg_refuse(req, 503, "INTERNAL_SERVER_ERROR", "out of memory");
		return;
	}
	if ((p = ws_upgrade_take(req, accept, &dg_ops, c, &gone)) == NULL) {
		dg_conn_free(c);
		return;
	}
	c->ws.peer = p;
	/* after a Finalize the next session goes on with the labels */
	p->flags |= PEER_NO_RESUME | PEER_KEEP_SPEAKERS;
	p->state = PEER_READY;
	peer_timer(p);
	log_debug("peer %llu: Deepgram live transcription, request %s",
	    (unsigned long long)p->id, c->request_id);
}

static const struct httpd_route dg_routes[] = {
	{ "/v1/listen", EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
	    EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_OPTIONS |
	    EVHTTP_REQ_PATCH | EVHTTP_REQ_TRACE | EVHTTP_REQ_CONNECT, 1, 0,
	    dg_request },
};

static const struct door dg_door = {
	.name = "deepgram",
	.busy = dg_file_busy,
	.stop = dg_file_stop,
};

int
deepgram_start(char *err, size_t errlen)
{
	if (!httpd_on())
		return 0;
	core_door_add(&dg_door);
	if (httpd_routes(dg_routes, 1) != 0) {
		snprintf(err, errlen, "deepgram: cannot add /v1/listen");
		return -1;
	}
	return 0;
}
