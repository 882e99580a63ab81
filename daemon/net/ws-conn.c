/*
 * One WebSocket connection (server side) over wslay: wslay's event layer
 * reads the client's frames (unmasking, fragments, control frames, UTF-8
 * of text, the size cap, the close handshake, pongs); our own text
 * messages go out through wslay's frame layer at once, so an event is on
 * the wire (in io->write) when ws_conn_send_text returns and the owner
 * can measure its backlog in one buffer. No I/O of its own: bytes come
 * from io->read and go to io->write.
 *
 * Failures: when wslay refuses the client's frames it queues a close
 * frame itself; that frame is held back, io->failed sends the error
 * event, then the close goes out, so the client always reads why. A
 * message over the rate cap (WS_CONN_MSG_RATE a second, as a bucket;
 * pings and pongs count, since each ping costs a pong) is failed the same
 * way with 1008, and so is a client that leaves more than max_unsent
 * bytes unread while it goes on sending (its pongs would pile up).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nettle/base64.h>
#include <nettle/sha1.h>
#include <wslay/wslay.h>

#include "ws-conn.h"

#define WS_GUID		"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define WS_REASON_MAX	123	/* a close frame's payload is <= 125 */

struct ws_conn {
	wslay_event_context_ptr	 ev;
	wslay_frame_context_ptr	 fr;		/* our text frames */
	const struct ws_conn_io	*io;
	void			*arg;
	size_t			 max_msg_bytes;
	size_t			 max_unsent;	/* 0: no bound */
	double			 tokens, last;	/* message rate bucket */
	double			 now;
	int			 flags;
#define WS_CONN_CLOSING	0x1	/* a close frame was queued */
#define WS_CONN_HOLD	0x2	/* wslay's output goes to held */
#define WS_CONN_FAIL	0x4	/* fail_* set: fail after the read */
#define WS_CONN_HELD	0x8	/* wslay's close is in held */
	enum proto_error	 fail_error;
	char			 fail_msg[PROTO_MSG_MAX];
	uint8_t			 held[WS_REASON_MAX + 16];
	size_t			 held_len;
};

static ssize_t
ws_conn_recv_cb(wslay_event_context_ptr ev, uint8_t *buf, size_t len,
    int flags, void *arg)
{
	struct ws_conn *c = arg;
	size_t n;

	if ((n = c->io->read(c->arg, buf, len)) == 0) {
		wslay_event_set_error(ev, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	return (ssize_t)n;
}

/* Both layers write here; wslay's own close may be held back. */
static ssize_t
ws_conn_write(struct ws_conn *c, const uint8_t *data, size_t len)
{
	if (c->flags & WS_CONN_HOLD) {
		/* Only a close frame is held: header and <= 125 bytes. */
		if (len > sizeof(c->held) - c->held_len)
			len = sizeof(c->held) - c->held_len;
		memcpy(c->held + c->held_len, data, len);
		c->held_len += len;
		return (ssize_t)len;
	}
	(void)c->io->write(c->arg, data, len);
	return (ssize_t)len;
}

static ssize_t
ws_conn_send_cb(wslay_event_context_ptr ev, const uint8_t *data, size_t len,
    int flags, void *arg)
{
	return ws_conn_write(arg, data, len);
}

static ssize_t
ws_conn_frame_send_cb(const uint8_t *data, size_t len, int flags, void *arg)
{
	return ws_conn_write(arg, data, len);
}

/* Remember the first failure; wslay stops reading at once. */
static void
ws_conn_fail(struct ws_conn *c, enum proto_error e, const char *msg)
{
	if (c->flags & (WS_CONN_FAIL | WS_CONN_CLOSING))
		return;
	c->flags |= WS_CONN_FAIL;
	c->fail_error = e;
	snprintf(c->fail_msg, sizeof(c->fail_msg), "%s", msg);
	wslay_event_shutdown_read(c->ev);
}

/* One more message within the rate cap? */
static int
ws_conn_rate_ok(struct ws_conn *c)
{
	double dt = c->now - c->last;

	if (dt > 0)
		c->tokens += dt * WS_CONN_MSG_RATE;
	if (c->tokens > WS_CONN_MSG_RATE)
		c->tokens = WS_CONN_MSG_RATE;
	c->last = c->now;
	if (c->tokens < 1)
		return 0;
	c->tokens -= 1;
	return 1;
}

static void
ws_conn_msg_cb(wslay_event_context_ptr ev,
    const struct wslay_event_on_msg_recv_arg *m, void *arg)
{
	struct ws_conn *c = arg;
	char msg[PROTO_MSG_MAX];

	if (c->flags & (WS_CONN_CLOSING | WS_CONN_FAIL))
		return;		/* after our close: dropped */
	if ((m->opcode == WSLAY_PING || m->opcode == WSLAY_PONG) &&
	    !ws_conn_rate_ok(c)) {
		snprintf(msg, sizeof(msg), "more than %d WebSocket messages "
		    "a second, pings and pongs included", WS_CONN_MSG_RATE);
		ws_conn_fail(c, PROTO_E_TOO_FAST, msg);
		return;
	}
	if (m->opcode != WSLAY_TEXT_FRAME && m->opcode != WSLAY_BINARY_FRAME)
		return;		/* close, ping, pong: wslay answers */
	if (!ws_conn_rate_ok(c)) {
		snprintf(msg, sizeof(msg), "more than %d WebSocket messages "
		    "a second; send audio in fewer, larger messages",
		    WS_CONN_MSG_RATE);
		ws_conn_fail(c, PROTO_E_TOO_FAST, msg);
		return;
	}
	c->io->message(c->arg, m->opcode == WSLAY_BINARY_FRAME, m->msg,
	    m->msg_length);
}

static int
ws_conn_genmask_cb(wslay_event_context_ptr ev, uint8_t *buf, size_t len,
    void *arg)
{
	memset(buf, 0, len);	/* servers do not mask */
	return 0;
}

struct ws_conn *
ws_conn_new(const struct ws_conn_io *io, void *arg, size_t max_msg_bytes)
{
	static const struct wslay_event_callbacks evcb = {
		.recv_callback = ws_conn_recv_cb,
		.send_callback = ws_conn_send_cb,
		.genmask_callback = ws_conn_genmask_cb,
		.on_msg_recv_callback = ws_conn_msg_cb,
	};
	static const struct wslay_frame_callbacks frcb = {
		.send_callback = ws_conn_frame_send_cb,
	};
	struct ws_conn *c;

	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->io = io;
	c->arg = arg;
	c->max_msg_bytes = max_msg_bytes;
	c->tokens = WS_CONN_MSG_RATE;
	c->last = -1;
	if (wslay_event_context_server_init(&c->ev, &evcb, c) != 0) {
		free(c);
		return NULL;
	}
	if (wslay_frame_context_init(&c->fr, &frcb, c) != 0) {
		wslay_event_context_free(c->ev);
		free(c);
		return NULL;
	}
	wslay_event_config_set_max_recv_msg_length(c->ev, max_msg_bytes);
	return c;
}

void
ws_conn_set_max_unsent(struct ws_conn *c, size_t max)
{
	c->max_unsent = max;
}

/* The client leaves too much unread: fail it before wslay sends more. */
static void
ws_conn_check_unsent(struct ws_conn *c)
{
	char msg[PROTO_MSG_MAX];
	size_t n;

	if (c->io->unsent == NULL || c->max_unsent == 0 ||
	    (n = c->io->unsent(c->arg)) <= c->max_unsent)
		return;
	snprintf(msg, sizeof(msg), "%zu bytes not read (server limit %zu): "
	    "the client sends, pings included, but does not read", n,
	    c->max_unsent);
	ws_conn_fail(c, PROTO_E_SLOW_READER, msg);
}

void
ws_conn_free(struct ws_conn *c)
{
	if (c == NULL)
		return;
	wslay_frame_context_free(c->fr);
	wslay_event_context_free(c->ev);
	free(c);
}

int
ws_conn_closed(const struct ws_conn *c)
{
	if (c->flags & WS_CONN_HELD)
		return 0;	/* the error event goes before it */
	return (c->flags & WS_CONN_CLOSING) ||
	    wslay_event_get_close_sent(c->ev);
}

void
ws_conn_close(struct ws_conn *c, uint16_t code, const char *reason)
{
	size_t n = reason != NULL ? strlen(reason) : 0;

	if (c->flags & WS_CONN_CLOSING)
		return;
	c->flags |= WS_CONN_CLOSING;
	if (n > WS_REASON_MAX)
		n = WS_REASON_MAX;	/* may cut a UTF-8 sequence: ASCII only */
	(void)wslay_event_queue_close(c->ev, code, (const uint8_t *)reason,
	    n);
	(void)wslay_event_send(c->ev);
}

int
ws_conn_send_text(struct ws_conn *c, const char *text, size_t len)
{
	struct wslay_frame_iocb f;
	ssize_t r;

	if (ws_conn_closed(c))
		return -1;
	memset(&f, 0, sizeof(f));
	f.fin = 1;
	f.opcode = WSLAY_TEXT_FRAME;
	f.payload_length = len;
	f.data = (const uint8_t *)text;
	f.data_length = len;
	r = wslay_frame_send(c->fr, &f);
	return r < 0 || (size_t)r != len ? -1 : 0;
}

/* The error a close code of wslay's own stands for. */
static enum proto_error
ws_conn_wslay_error(struct ws_conn *c, uint16_t code, char *msg)
{
	switch (code) {
	case WS_CLOSE_TOO_BIG:
		snprintf(msg, PROTO_MSG_MAX, "a WebSocket message over %zu "
		    "bytes (max_frame_bytes)", c->max_msg_bytes);
		return PROTO_E_TOO_LARGE;
	case WS_CLOSE_BAD_DATA:
		snprintf(msg, PROTO_MSG_MAX, "a text message that is not "
		    "UTF-8");
		return PROTO_E_BAD_FRAME;
	default:
		snprintf(msg, PROTO_MSG_MAX, "a bad WebSocket frame (RFC "
		    "6455: client frames are masked, no reserved bits or "
		    "opcodes, control frames whole and short)");
		return PROTO_E_BAD_FRAME;
	}
}

/* A close frame with code, through wslay's frame layer. */
static void
ws_conn_send_close(struct ws_conn *c, uint16_t code)
{
	struct wslay_frame_iocb f;
	uint8_t payload[2] = { code >> 8, code & 0xff };

	memset(&f, 0, sizeof(f));
	f.fin = 1;
	f.opcode = WSLAY_CONNECTION_CLOSE;
	f.payload_length = sizeof(payload);
	f.data = payload;
	f.data_length = sizeof(payload);
	(void)wslay_frame_send(c->fr, &f);
}

/*
 * wslay queued a close of its own: send it after the error event that
 * says why. A frame its frame layer refused gets a close without a code
 * from wslay; it is sent with 1002 instead.
 */
static void
ws_conn_wslay_closed(struct ws_conn *c)
{
	char msg[PROTO_MSG_MAX];
	enum proto_error e;
	uint16_t code;

	c->flags |= WS_CONN_HOLD;
	c->held_len = 0;
	(void)wslay_event_send(c->ev);
	c->flags &= ~WS_CONN_HOLD;
	code = wslay_event_get_status_code_sent(c->ev);
	if (code == 0 || code == WSLAY_CODE_NO_STATUS_RCVD)
		code = WS_CLOSE_PROTOCOL;
	e = ws_conn_wslay_error(c, code, msg);
	c->flags |= WS_CONN_HELD;
	c->io->failed(c->arg, e, msg);
	c->flags &= ~WS_CONN_HELD;
	c->flags |= WS_CONN_CLOSING;
	if (code != wslay_event_get_status_code_sent(c->ev))
		ws_conn_send_close(c, code);
	else if (c->held_len > 0)
		(void)c->io->write(c->arg, c->held, c->held_len);
}

int
ws_conn_recv(struct ws_conn *c, double now)
{
	int rc;

	c->now = now;
	if (c->last < 0)
		c->last = now;
	rc = wslay_event_recv(c->ev);
	ws_conn_check_unsent(c);
	if (c->flags & WS_CONN_FAIL) {
		c->flags &= ~WS_CONN_FAIL;
		c->io->failed(c->arg, c->fail_error, c->fail_msg);
		ws_conn_close(c, ws_close_code(c->fail_error), "");
	} else if (rc == WSLAY_ERR_NOMEM && !(c->flags & WS_CONN_CLOSING)) {
		c->io->failed(c->arg, PROTO_E_INTERNAL, "out of memory");
		ws_conn_close(c, WS_CLOSE_INTERNAL, "");
	} else if (!wslay_event_get_read_enabled(c->ev) &&
	    !wslay_event_get_close_received(c->ev) &&
	    !(c->flags & WS_CONN_CLOSING)) {
		ws_conn_wslay_closed(c);
	}
	(void)wslay_event_send(c->ev);	/* pongs, the answer to a close */
	return wslay_event_want_read(c->ev) ? 0 : -1;
}

uint16_t
ws_close_code(enum proto_error e)
{
	switch (e) {
	case PROTO_OK:
		return WS_CLOSE_NORMAL;
	case PROTO_E_BAD_FRAME:
		return WS_CLOSE_PROTOCOL;
	case PROTO_E_TOO_LARGE:
		return WS_CLOSE_TOO_BIG;
	case PROTO_E_BAD_JSON:
		return WS_CLOSE_BAD_DATA;
	case PROTO_E_BUSY:
	case PROTO_E_TOO_MANY:
		return WS_CLOSE_TRY_AGAIN;
	case PROTO_E_SHUTDOWN:
		return WS_CLOSE_GOING_AWAY;
	case PROTO_E_INTERNAL:
		return WS_CLOSE_INTERNAL;
	default:
		return WS_CLOSE_POLICY;
	}
}

int
ws_accept_key(const char *key, char ret[WS_ACCEPT_KEY_BYTES])
{
	struct base64_decode_ctx b64;
	struct sha1_ctx sha;
	uint8_t raw[24], digest[SHA1_DIGEST_SIZE];
	size_t n = sizeof(raw);

	/* 16 random bytes in base64: 22 characters and "==". */
	if (strlen(key) != 24)
		return -1;
	base64_decode_init(&b64);
	if (!base64_decode_update(&b64, &n, raw, 24, key) ||
	    !base64_decode_final(&b64) || n != 16)
		return -1;
	sha1_init(&sha);
	sha1_update(&sha, 24, (const uint8_t *)key);
	sha1_update(&sha, sizeof(WS_GUID) - 1, (const uint8_t *)WS_GUID);
	sha1_digest(&sha, sizeof(digest), digest);
	base64_encode_raw(ret, sizeof(digest), digest);
	ret[BASE64_ENCODE_RAW_LENGTH(SHA1_DIGEST_SIZE)] = '\0';
	return 0;
}
