/*
 * A client on the Unix socket speaks the sottod protocol in frames
 * (common/proto.h: a 4-byte length, a type, a payload): each whole frame
 * goes to peer_dispatch, each event goes out as an EVENT frame. A client
 * of the same machine writes and reads in whole frames and never sends
 * after closing, so a peer closes at once when it is done (no linger).
 */

#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>

#include "core.h"
#include "log.h"
#include "peer.h"
#include "unix.h"

/* Dispatch the whole frames p's input holds (paused: only with force). */
static void
unix_frames(struct peer *p, int force)
{
	struct evbuffer *in = bufferevent_get_input(p->bev);
	size_t max = core_config()->max_frame_bytes, used, avail;
	struct proto_frame f;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	uint8_t *buf;
	int rc;

	while (!(p->flags & (PEER_DEAD | PEER_CLOSING)) &&
	    (force || !(p->flags & PEER_PAUSED))) {
		avail = evbuffer_get_length(in);
		if (avail < PROTO_HEADER_BYTES)
			break;
		buf = evbuffer_pullup(in, PROTO_HEADER_BYTES);
		rc = proto_frame_parse(buf, PROTO_HEADER_BYTES, max, &f, &used,
		    &e, msg);
		if (rc < 0) {
			peer_fail(p, e, "%s", msg);
			break;
		}
		used = 4 + ((size_t)buf[0] | (size_t)buf[1] << 8 |
		    (size_t)buf[2] << 16 | (size_t)buf[3] << 24);
		if (avail < used)
			break;
		buf = evbuffer_pullup(in, (ssize_t)used);
		if (proto_frame_parse(buf, used, max, &f, &used, &e,
		    msg) != 1) {
			peer_fail(p, PROTO_E_INTERNAL, "frame decode");
			break;
		}
		peer_dispatch(p, &f);
		if (p->flags & PEER_DEAD)
			break;
		evbuffer_drain(in, used);
		peer_timer(p);
	}
}

static void
unix_read(struct peer *p)
{
	unix_frames(p, 0);
}

static void
unix_write(struct peer *p, const char *json)
{
	uint8_t hdr[PROTO_HEADER_BYTES];
	size_t n = strlen(json);
	struct evbuffer *out = bufferevent_get_output(p->bev);

	proto_frame_header(hdr, MSG_EVENT, n);
	if (evbuffer_add(out, hdr, sizeof(hdr)) != 0 ||
	    evbuffer_add(out, json, n) != 0) {
		log_warnx("peer %llu: out of memory", (unsigned long long)p->id);
		peer_close(p);
	}
}

/*
 * SIGTERM: take in what a streaming client wrote before the signal (all
 * its socket holds now, even while its reading is paused) and dispatch
 * those frames; peer.c then stops reading it for good. Its "end" says
 * how much was received.
 */
static void
unix_drain(struct peer *p)
{
	size_t n;

	if (p->state == PEER_STREAMING && (n = peer_take_unread(p)) > 0)
		log_debug("peer %llu: %zu bytes read at shutdown",
		    (unsigned long long)p->id, n);
	unix_frames(p, 1);
}

const struct peer_ops unix_ops = {
	.name = "socket",
	.greeting = "HELLO",
	.read = unix_read,
	.write = unix_write,
	.drain = unix_drain,
};
