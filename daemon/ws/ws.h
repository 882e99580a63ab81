/*
 * The WebSocket door (ws.c, ws-msg.c): the sottod protocol over a
 * WebSocket at /ws on the HTTP listener, the browser's way in (the page
 * at /, daemon/http/web.c, uses it). Binary messages are AUDIO, text
 * messages are the protocol's JSON frames; events go out as text.
 */
#ifndef SOTTOD_WS_H
#define SOTTOD_WS_H

#include <stddef.h>
#include <stdint.h>

#include "proto.h"

/* Add /ws to the HTTP listener, when there is one. 0, or -1 with err. */
int	ws_start(char *err, size_t errlen);

/*
 * ws-msg.c: a message as a sottod protocol frame pointing into the
 * message: binary is MSG_AUDIO; text is one JSON object whose "type" is
 * "open" (also when there is no "type"), "subscribe", "end" or "status".
 * Returns PROTO_OK or an error with msg (PROTO_MSG_MAX bytes).
 */
enum proto_error ws_msg_frame(int binary, const uint8_t *, size_t,
	    struct proto_frame *ret, char *msg);

#endif
