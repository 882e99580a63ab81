/*
 * One WebSocket connection's RFC 6455 frames and messages (ws-conn.c),
 * free of libevent and of the daemon's state so that tests/fuzz/fuzz-ws.c
 * can drive it: wslay does the framing, masking, fragments, ping/pong,
 * UTF-8 and the close handshake; on top, a message size cap, a message
 * rate cap, and the Sec-WebSocket-Accept of the upgrade. ws-upgrade.h
 * takes a connection over from the HTTP listener; a door (daemon/ws)
 * joins the two to a peer.
 */
#ifndef SOTTOD_WS_CONN_H
#define SOTTOD_WS_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Close codes (RFC 6455 section 7.4.1) that sottod sends. */
#define WS_CLOSE_NORMAL		1000
#define WS_CLOSE_GOING_AWAY	1001
#define WS_CLOSE_PROTOCOL	1002
#define WS_CLOSE_BAD_DATA	1007
#define WS_CLOSE_POLICY		1008
#define WS_CLOSE_TOO_BIG	1009
#define WS_CLOSE_INTERNAL	1011
#define WS_CLOSE_TRY_AGAIN	1013

/* Messages a second a client may send, as a bucket of this many. */
#define WS_CONN_MSG_RATE	200

/* base64 of the 20-byte SHA-1: 28 characters and a NUL. */
#define WS_ACCEPT_KEY_BYTES	29

struct ws_conn;

struct ws_conn_io {
	/* Copy up to len received bytes to buf; 0 when there are none now. */
	size_t	(*read)(void *arg, uint8_t *buf, size_t len);
	/* Send len bytes (all of them); -1 when out of memory. */
	int	(*write)(void *arg, const uint8_t *buf, size_t len);
	/*
	 * One whole message: text (valid UTF-8) or binary, borrowed for
	 * the call. The owner may send or close from it.
	 */
	void	(*message)(void *arg, int binary, const uint8_t *, size_t);
	/*
	 * The client broke the protocol (bad frame, a message over the
	 * size cap, text not UTF-8, too many messages): ws-conn closes
	 * the connection with the right code just after this returns; the
	 * owner may send one text message (the error event) from it.
	 */
	void	(*failed)(void *arg, enum proto_error, const char *msg);
	/*
	 * Bytes written but not yet sent to the client (may be NULL): past
	 * ws_conn_set_max_unsent's bound the client is a slow reader.
	 */
	size_t	(*unsent)(void *arg);
};

/*
 * A server-side connection; io and arg are borrowed for its lifetime.
 * max_msg_bytes caps one message (fragments included). NULL when out of
 * memory.
 */
struct ws_conn *ws_conn_new(const struct ws_conn_io *io, void *arg,
	    size_t max_msg_bytes);
void	ws_conn_free(struct ws_conn *);
/*
 * Bound what the client may leave unread (io->unsent) while it keeps
 * sending: wslay answers every ping with a pong, so a client that pings
 * and never reads would grow our output without end. Past it, io->failed
 * gets slow_reader and the connection closes. 0: no bound.
 */
void	ws_conn_set_max_unsent(struct ws_conn *, size_t);

/*
 * Read what io->read has, hand over each whole message; now is a clock
 * in seconds for the rate cap. Returns 0, or -1 when the connection is
 * over (closed by either side, or it failed): the owner closes it once
 * its output is written.
 */
int	ws_conn_recv(struct ws_conn *, double now);

/* Send a text message now. Returns 0, or -1 once a close was sent. */
int	ws_conn_send_text(struct ws_conn *, const char *, size_t);

/* Send a close frame with code and a short reason (at most 123 bytes). */
void	ws_conn_close(struct ws_conn *, uint16_t code, const char *reason);

/* Whether a close frame went out (no more messages may follow). */
int	ws_conn_closed(const struct ws_conn *);

/*
 * The Sec-WebSocket-Accept value for a client's Sec-WebSocket-Key, which
 * must be the base64 of 16 bytes. Returns 0, or -1 for a bad key.
 */
int	ws_accept_key(const char *key, char ret[WS_ACCEPT_KEY_BYTES]);

/* The close code for an error event's code. */
uint16_t ws_close_code(enum proto_error);

#endif
