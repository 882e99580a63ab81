/*
 * A WebSocket upgrade on the HTTP listener (ws-upgrade.c): the request
 * checked, then the connection taken from evhttp as a peer of the door
 * that asked.
 */
#ifndef SOTTOD_WS_UPGRADE_H
#define SOTTOD_WS_UPGRADE_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "ws-conn.h"

struct evhttp_request;
struct peer;
struct peer_ops;

/*
 * Check req as an upgrade this listener takes (see ws-upgrade.c); 0 with
 * the Sec-WebSocket-Accept value in accept, or -1 after answering it.
 */
int	ws_upgrade_check(struct evhttp_request *,
	    char accept[WS_ACCEPT_KEY_BYTES]);
struct peer *ws_upgrade_take(struct evhttp_request *, const char *accept,
	    const struct peer_ops *, void *front, int *ret_gone);
/*
 * WebSocket connections taken over and open now: all of them (addr
 * NULL), or those from addr (as peer_addr gives it).
 */
int	ws_upgrade_count(const char *addr);

/*
 * A WebSocket door's state of a peer (p->front) begins with this, so
 * that the door's ws_conn_io and peer_ops take these for what every
 * door does alike. ws_conn_new gets the struct ws_peer as its arg.
 */
struct ws_peer {
	struct peer		*peer;
	struct ws_conn		*conn;
	int			 taking;	/* SIGTERM: read while paused */
};

/*
 * ws_conn_io: read what the socket holds (not while the peer is paused,
 * but for ws_peer_drain), write to it, a broken protocol failing the
 * peer (its error event, then the close), and what the client has not
 * read yet beyond the kernel's buffer.
 */
size_t	ws_peer_io_read(void *ws_peer, uint8_t *buf, size_t len);
int	ws_peer_io_write(void *ws_peer, const uint8_t *buf, size_t len);
void	ws_peer_io_failed(void *ws_peer, enum proto_error, const char *msg);
size_t	ws_peer_io_unsent(void *ws_peer);

/*
 * peer_ops->read: the frames that came, under the bound peer.c gives
 * events (for what wslay sends itself); the client's close, or a broken
 * frame, ends the peer.
 */
void	ws_peer_read(struct peer *);
/*
 * peer_ops->drain (SIGTERM): take in what the client wrote before the
 * signal, all its socket holds now even while reading is paused, as the
 * socket door does; peer.c then stops reading it for good.
 */
void	ws_peer_drain(struct peer *);
/*
 * peer_ops->closing: a close frame, going away while sottod drains,
 * unless one went out already.
 */
void	ws_peer_closing(struct peer *);
/*
 * After peer_ops->write sent the event json its door's way: an error
 * event is the last thing sent, with the close frame that says the same.
 */
void	ws_peer_close_on_error(struct ws_conn *, const char *json);

#endif
