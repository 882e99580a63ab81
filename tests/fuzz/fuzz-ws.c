/*
 * libFuzzer target for the WebSocket side of sottod (daemon/net/ws-conn.c,
 * daemon/ws/ws-msg.c): the input is what a client sends after the upgrade,
 * read in chunks whose sizes and times the input also picks. Every
 * message goes through ws_msg_frame and the socket protocol's parsers as
 * sottod's peer does, and is answered like sottod answers: an event per
 * message, an error event and a close on a bad one. What the server side
 * writes is read back by a wslay client, which must find only whole,
 * valid frames: pongs, text events that are JSON objects with a "type",
 * and at most one close, last. The client reads nothing until the end,
 * so all the output is unsent: past a bound the input picks (as sottod's
 * max_client_buffer_bytes) the connection must fail as a slow reader,
 * and the output may pass that bound by at most one read's answers.
 * (The rate cap alone does not bound it: time passes between reads.)
 * The upgrade key check runs on the input's first line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wslay/wslay.h>

#include "proto.h"
#include "ws-conn.h"
#include "ws.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_MAX_MSG	(64 * 1024)
/*
 * What one read turn (at most 255 bytes: some 40 short messages, each
 * answered by an event of at most a few hundred bytes) can make the
 * server write.
 */
#define FUZZ_TURN_OUT	(16 * 1024)

struct fuzz {
	const uint8_t	*in;
	size_t		 in_len, in_off;
	size_t		 chunk;		/* bytes per read turn, 1..255 */
	size_t		 budget;		/* left in this turn */
	double		 now;
	struct ws_conn	*conn;
	uint8_t		*out;		/* what the server wrote */
	size_t		 out_len, out_off;
	int		 failed, closes;
};

static size_t
fuzz_read(void *arg, uint8_t *buf, size_t len)
{
	struct fuzz *f = arg;
	size_t n = f->in_len - f->in_off;

	if (n > f->budget)
		n = f->budget;
	if (n > len)
		n = len;
	memcpy(buf, f->in + f->in_off, n);
	f->in_off += n;
	f->budget -= n;
	return n;
}

static int
fuzz_write(void *arg, const uint8_t *buf, size_t len)
{
	struct fuzz *f = arg;
	uint8_t *p;

	if ((p = realloc(f->out, f->out_len + len + 1)) == NULL)
		abort();
	f->out = p;
	memcpy(f->out + f->out_len, buf, len);
	f->out_len += len;
	return 0;
}

/* As peer_fail: one error event, then the close. */
static void
fuzz_fail(struct fuzz *f, enum proto_error e, const char *msg)
{
	char *ev;

	if ((ev = proto_event_error(e, msg)) == NULL)
		abort();
	(void)ws_conn_send_text(f->conn, ev, strlen(ev));
	free(ev);
	ws_conn_close(f->conn, ws_close_code(e), proto_error_name(e));
	f->failed++;
}

static enum proto_error
fuzz_parse(const struct proto_frame *fr, char *msg)
{
	struct msg_open o;
	struct msg_subscribe s;

	switch (fr->type) {
	case MSG_OPEN:
		return proto_parse_open(fr->payload, fr->len, &o, msg);
	case MSG_SUBSCRIBE:
		return proto_parse_subscribe(fr->payload, fr->len, &s, msg);
	case MSG_END:
	case MSG_STATUS:
		return proto_parse_empty(fr->payload, fr->len, msg);
	case MSG_AUDIO:
		return PROTO_OK;
	default:
		abort();	/* ws_msg_frame makes no other type */
	}
}

static void
fuzz_message(void *arg, int binary, const uint8_t *p, size_t n)
{
	struct fuzz *f = arg;
	struct proto_frame fr;
	enum proto_error e;
	char msg[PROTO_MSG_MAX], *ev;

	if (n > FUZZ_MAX_MSG)
		abort();	/* over the cap: wslay must refuse it */
	e = ws_msg_frame(binary, p, n, &fr, msg);
	if (e == PROTO_OK)
		e = fuzz_parse(&fr, msg);
	if (e != PROTO_OK)
		return fuzz_fail(f, e, msg);
	ev = proto_event_partial("fuzz", proto_type_name(fr.type), 0,
	    (double)n, 0);
	if (ev == NULL)
		abort();
	(void)ws_conn_send_text(f->conn, ev, strlen(ev));
	free(ev);
}

static void
fuzz_failed(void *arg, enum proto_error e, const char *msg)
{
	fuzz_fail(arg, e, msg);
}

/* The client reads only at the end: everything written is unsent. */
static size_t
fuzz_unsent(void *arg)
{
	struct fuzz *f = arg;

	return f->out_len;
}

static const struct ws_conn_io fuzz_io = {
	.read = fuzz_read,
	.write = fuzz_write,
	.message = fuzz_message,
	.failed = fuzz_failed,
	.unsent = fuzz_unsent,
};

/* The client's side of what the server wrote. */
static ssize_t
client_recv_cb(wslay_event_context_ptr ev, uint8_t *buf, size_t len,
    int flags, void *arg)
{
	struct fuzz *f = arg;
	size_t n = f->out_len - f->out_off;

	if (n == 0) {
		wslay_event_set_error(ev, WSLAY_ERR_WOULDBLOCK);
		return -1;
	}
	if (n > len)
		n = len;
	memcpy(buf, f->out + f->out_off, n);
	f->out_off += n;
	return (ssize_t)n;
}

static ssize_t
client_send_cb(wslay_event_context_ptr ev, const uint8_t *data, size_t len,
    int flags, void *arg)
{
	return (ssize_t)len;
}

static int
client_genmask_cb(wslay_event_context_ptr ev, uint8_t *buf, size_t len,
    void *arg)
{
	memset(buf, 0x5a, len);
	return 0;
}

static void
client_msg_cb(wslay_event_context_ptr ev,
    const struct wslay_event_on_msg_recv_arg *m, void *arg)
{
	struct fuzz *f = arg;
	char type[PROTO_NAME_MAX], msg[PROTO_MSG_MAX];

	if (m->opcode == WSLAY_CONNECTION_CLOSE) {
		f->closes++;
		return;
	}
	if (f->closes > 0)
		abort();	/* nothing after the close */
	if (m->opcode == WSLAY_PONG)
		return;		/* the answer to a ping */
	if (m->opcode != WSLAY_TEXT_FRAME)
		abort();	/* and else only events */
	if (proto_parse_event(m->msg, m->msg_length, type, msg) != PROTO_OK)
		abort();
}

static void
fuzz_check_output(struct fuzz *f)
{
	static const struct wslay_event_callbacks cb = {
		.recv_callback = client_recv_cb,
		.send_callback = client_send_cb,
		.genmask_callback = client_genmask_cb,
		.on_msg_recv_callback = client_msg_cb,
	};
	wslay_event_context_ptr client;

	if (wslay_event_context_client_init(&client, &cb, f) != 0)
		abort();
	wslay_event_config_set_max_recv_msg_length(client, 1 << 20);
	(void)wslay_event_recv(client);
	/* A client that found a bad frame would have closed with 1002+. */
	if (f->out_off != f->out_len || (wslay_event_get_close_sent(client) &&
	    wslay_event_get_status_code_sent(client) >= 1002 &&
	    !f->closes))
		abort();
	wslay_event_context_free(client);
}

static void
fuzz_key(const uint8_t *data, size_t size)
{
	char key[64], accept[WS_ACCEPT_KEY_BYTES];
	size_t n = 0;

	while (n < size && n < sizeof(key) - 1 && data[n] != '\n')
		n++;
	memcpy(key, data, n);
	key[n] = '\0';
	if (ws_accept_key(key, accept) == 0 && strlen(accept) != 28)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz f;
	size_t steps = 0, max_unsent;

	if (size < 2)
		return 0;
	fuzz_key(data + 2, size - 2);
	memset(&f, 0, sizeof(f));
	f.chunk = data[0] ? data[0] : 1;
	f.in = data + 2;
	f.in_len = size - 2;
	if ((f.conn = ws_conn_new(&fuzz_io, &f, FUZZ_MAX_MSG)) == NULL)
		abort();
	max_unsent = 8 * 1024;	/* sottod's least is 4 KiB */
	ws_conn_set_max_unsent(f.conn, max_unsent);
	/* Each read turn advances the clock by data[1] ms. */
	while (steps++ < 100000) {
		f.budget = f.chunk;
		if (ws_conn_recv(f.conn, f.now) < 0 || f.in_off == f.in_len)
			break;
		if (f.out_len > max_unsent + FUZZ_TURN_OUT)
			abort();	/* the bound did not hold */
		f.now += data[1] / 1000.0;
	}
	fuzz_check_output(&f);
	ws_conn_free(f.conn);
	free(f.out);
	return 0;
}
