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

#endif
