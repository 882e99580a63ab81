/*
 * A WebSocket upgrade on the HTTP listener (ws-upgrade.c): the request
 * checked, then the connection taken from evhttp as a peer of the door
 * that asked.
 */
#ifndef SOTTOD_WS_UPGRADE_H
#define SOTTOD_WS_UPGRADE_H

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
 * peer_ops->closing of a WebSocket door: a close frame, going away while
 * sottod drains, unless one went out already.
 */
void	ws_peer_closing(struct ws_conn *);
/*
 * peer_ops->drain of a WebSocket door (SIGTERM): take in what the client
 * wrote before the signal, all its socket holds now even while reading
 * is paused, as the socket door does; peer.c then stops reading it for
 * good. *taking is the door's flag that lets its read callback run while
 * paused, set for the while.
 */
void	ws_peer_drain(struct peer *, struct ws_conn *, int *taking);
/*
 * peer_ops->read of a WebSocket door: the frames that came, under the
 * bound peer.c gives events (for what wslay sends itself); the client's
 * close, or a broken frame, ends the peer.
 */
void	ws_peer_read(struct peer *, struct ws_conn *);
/*
 * After peer_ops->write sent the event json its door's way: an error
 * event is the last thing sent, with the close frame that says the same.
 */
void	ws_peer_close_on_error(struct ws_conn *, const char *json);
/* ws_conn_io->unsent: what the client has not read, beyond the kernel's. */
size_t	ws_peer_unsent(const struct peer *);

#endif
