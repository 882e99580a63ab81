/*
 * One client connection of any door: a bufferevent whose input the
 * door's ops read, and events written back in the door's format with
 * limits.
 *
 * Output: a partial is dropped while more than a quarter of
 * max_client_buffer_bytes (at most PEER_PARTIAL_MAX_BYTES) waits to be
 * written (the next one replaces it anyway); finals and control events
 * are never dropped, but a peer whose unwritten output they would take
 * past max_client_buffer_bytes is a slow reader: a slow_reader error is
 * queued after what it has not read yet, and the connection is closed
 * once all of that is written (or after PEER_CLOSE_TIMEOUT_S without
 * progress). Its session then waits for a resume like any other lost
 * connection. Finals resent by a resume or a subscription (at most
 * SESSION_HISTORY_MAX) are queued whatever the bound.
 *
 * Timeouts (peer_timer): a connection that has not sent HELLO within
 * handshake_timeout_seconds, or that sends no frame for
 * idle_timeout_seconds while it is expected to (READY, or STREAMING
 * while we read it), gets a timeout error and is closed, so idle sockets
 * cannot hold connection slots. Every frame restarts the clock.
 *
 * Any malformed or out-of-order frame gets an error event, then the
 * connection is closed once that event is written (or after
 * PEER_CLOSE_TIMEOUT_S); other connections never notice. The peer of a
 * door whose clients may still be sending (ops->linger: TCP) lingers
 * instead: once the event is written our side is shut down and what the
 * client sends is read and dropped until it closes too (at most
 * PEER_LINGER_BYTES, or PEER_CLOSE_TIMEOUT_S without a byte), because
 * closing with input unread resets the connection, and a reset can lose
 * the error event before the client reads it.
 *
 * A peer is freed from a zero-timeout event_base_once(), never inside one
 * of its own callbacks, so a callback may close it and return safely.
 */
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "core-private.h"
#include "log.h"
#include "peer.h"
#include "session.h"

#define PEER_PARTIAL_MAX_BYTES	(64 * 1024)
#define PEER_SNDBUF_BYTES	(4 * 1024)	/* the kernel doubles it */
#define PEER_CLOSE_TIMEOUT_S	5
#define PEER_LINGER_BYTES	(1024 * 1024)

static struct peer_list peers = TAILQ_HEAD_INITIALIZER(peers);
static uint64_t peer_next_id = 1;
static uint64_t peer_dropped_total;

static void	peer_read_cb(struct bufferevent *, void *);
static void	peer_write_cb(struct bufferevent *, void *);
static void	peer_event_cb(struct bufferevent *, short, void *);
static void	peer_flushed(struct peer *);
static void	peer_timeout_cb(int, short, void *);

uint64_t
peer_dropped_partials(void)
{
	return peer_dropped_total;
}

int
peer_count(void)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		n++;
	return n;
}

int
peer_count_door(const struct peer_ops *ops)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		if (p->ops == ops)
			n++;
	return n;
}

int
peer_count_uid(const struct peer_ops *ops, long uid)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		if (p->ops == ops && p->uid == uid)
			n++;
	return n;
}

int
peer_count_addr(const struct peer_ops *ops, const char *addr)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		if (p->ops == ops && strcmp(p->addr, addr) == 0)
			n++;
	return n;
}

void
peer_addr(int fd, char addr[PEER_ADDR_MAX])
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	const void *a = NULL;

	addr[0] = '\0';
	if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0)
		return;
	int af = ss.ss_family;

	if (af == AF_INET)
		a = &((struct sockaddr_in *)&ss)->sin_addr;
	else if (af == AF_INET6) {
		a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
		/* an IPv4 client of a dual-stack listener: its IPv4 address */
		if (IN6_IS_ADDR_V4MAPPED((const struct in6_addr *)a)) {
			a = (const uint8_t *)a + 12;
			af = AF_INET;
		}
	}
	if (a == NULL || inet_ntop(af, a, addr, PEER_ADDR_MAX) == NULL)
		addr[0] = '\0';
}

int
peer_count_subscribed(void)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		if (p->state == PEER_SUBSCRIBED)
			n++;
	return n;
}

struct peer *
peer_find(uint64_t id)
{
	struct peer *p;

	TAILQ_FOREACH(p, &peers, entry)
		if (p->id == id)
			return p;
	return NULL;
}

/*
 * Keep the kernel's share of a peer's unread output small, so that
 * max_client_buffer_bytes bounds nearly all of it; events are small and
 * few per second, a reading client never fills even this.
 */
static void
peer_sndbuf(int fd)
{
	int size = PEER_SNDBUF_BYTES;

	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)) != 0)
		log_debug("SO_SNDBUF: %s", strerror(errno));
}

/* A peer for an accepted fd (which it owns from now on), or NULL. */
struct peer *
peer_new(int fd, long uid, const struct peer_ops *ops)
{
	struct peer *p;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		log_warnx("accept: out of memory");
		evutil_closesocket(fd);
		return NULL;
	}
	evutil_make_socket_nonblocking(fd);
	peer_sndbuf(fd);
	p->bev = bufferevent_socket_new(core.base, fd,
	    BEV_OPT_CLOSE_ON_FREE);
	if (p->bev == NULL) {
		log_warnx("accept: cannot make a bufferevent");
		evutil_closesocket(fd);
		free(p);
		return NULL;
	}
	if ((p->timer = evtimer_new(core.base, peer_timeout_cb, p)) ==
	    NULL) {
		log_warnx("accept: out of memory");
		bufferevent_free(p->bev);
		free(p);
		return NULL;
	}
	p->id = peer_next_id++;
	p->uid = uid;
	peer_addr(fd, p->addr);
	p->ops = ops;
	p->state = PEER_NEW;
	peer_timer(p);
	bufferevent_setcb(p->bev, peer_read_cb, peer_write_cb, peer_event_cb,
	    p);
	bufferevent_enable(p->bev, EV_READ | EV_WRITE);
	TAILQ_INSERT_TAIL(&peers, p, entry);
	log_debug("peer %llu: connected (uid %ld)", (unsigned long long)p->id,
	    uid);
	return p;
}

static void
peer_free_cb(int fd, short ev, void *arg)
{
	struct peer *p = arg;

	if (p->ops->free != NULL)
		p->ops->free(p);
	sotto_speaker_track_free(p->track);
	free(p);
	server_drain_check();
}

/* Close now: detach from the session, free on the next loop turn. */
void
peer_close(struct peer *p)
{
	struct timeval zero = { 0, 0 };

	if (p->flags & PEER_DEAD)
		return;
	p->flags |= PEER_DEAD;
	if (p->session != NULL)
		session_detach(p->session, p);
	TAILQ_REMOVE(&peers, p, entry);
	bufferevent_free(p->bev);
	p->bev = NULL;
	event_free(p->timer);
	p->timer = NULL;
	log_debug("peer %llu: closed", (unsigned long long)p->id);
	if (event_base_once(core.base, -1, EV_TIMEOUT, peer_free_cb, p,
	    &zero) != 0)
		log_warnx("peer %llu: leaked (event_base_once failed)",
		    (unsigned long long)p->id);
}

/* Stop reading; close once what is queued has been written. */
void
peer_close_after_flush(struct peer *p)
{
	struct timeval tv = { PEER_CLOSE_TIMEOUT_S, 0 };

	if (p->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	p->flags |= PEER_CLOSING;
	evtimer_del(p->timer);
	if (p->session != NULL)
		session_detach(p->session, p);
	if (p->ops->closing != NULL)
		p->ops->closing(p);	/* its last words, e.g. a close frame */
	if (p->ops->linger)
		bufferevent_enable(p->bev, EV_READ);
	else
		bufferevent_disable(p->bev, EV_READ);
	bufferevent_set_timeouts(p->bev, p->ops->linger ? &tv : NULL, &tv);
	if (evbuffer_get_length(bufferevent_get_output(p->bev)) == 0)
		peer_flushed(p);
}

/* A closing peer's output is written: close, or linger (see above). */
static void
peer_flushed(struct peer *p)
{
	if (!p->ops->linger) {
		peer_close(p);
		return;
	}
	if (p->flags & PEER_LINGER)
		return;
	p->flags |= PEER_LINGER;
	if (shutdown(bufferevent_getfd(p->bev), SHUT_WR) != 0)
		peer_close(p);
}

/* Input of a lingering peer: dropped; too much of it ends the wait. */
static void
peer_linger_read(struct peer *p, struct evbuffer *in)
{
	size_t n = evbuffer_get_length(in);

	evbuffer_drain(in, n);
	p->lingered += n;
	if (p->lingered > PEER_LINGER_BYTES)
		peer_close(p);
}

static void
peer_write(struct peer *p, const char *json)
{
	p->ops->write(p, json);
}

/* Queue a partial only while the peer keeps up with its output. */
static size_t
peer_partial_max(void)
{
	size_t max = core.cfg.max_client_buffer_bytes / 4;

	return max < PEER_PARTIAL_MAX_BYTES ? max : PEER_PARTIAL_MAX_BYTES;
}

/* The peer's backlog passed the bound: tell it (after the backlog), close. */
static void
peer_slow_reader(struct peer *p, size_t queued)
{
	char msg[PROTO_MSG_MAX], *ev;

	log_warnx("peer %llu: slow reader: %zu bytes of events not read "
	    "(max_client_buffer_bytes %zu); disconnecting",
	    (unsigned long long)p->id, queued,
	    core.cfg.max_client_buffer_bytes);
	snprintf(msg, sizeof(msg), "%zu bytes of events not read (server "
	    "limit %zu); reconnect with the session id and since to get the "
	    "finals after the last one read", queued,
	    core.cfg.max_client_buffer_bytes);
	core_count_error(PROTO_E_SLOW_READER);
	if ((ev = proto_event_error(PROTO_E_SLOW_READER, msg)) != NULL) {
		peer_write(p, ev);
		free(ev);
	}
	peer_close_after_flush(p);
}

void
peer_send(struct peer *p, enum peer_event kind, const char *json)
{
	size_t queued, n;

	if (json == NULL || (p->flags & (PEER_DEAD | PEER_CLOSING)))
		return;
	queued = evbuffer_get_length(bufferevent_get_output(p->bev));
	n = PROTO_HEADER_BYTES + strlen(json);
	if (kind == PEER_EVENT_PARTIAL && queued > peer_partial_max()) {
		p->dropped_partials++;
		peer_dropped_total++;
		return;
	}
	if (kind != PEER_EVENT_REPLAY && queued > 0 &&
	    queued + n > core.cfg.max_client_buffer_bytes) {
		peer_slow_reader(p, queued);
		return;
	}
	peer_write(p, json);
}

void
peer_fail(struct peer *p, enum proto_error code, const char *fmt, ...)
{
	char msg[PROTO_MSG_MAX], *ev;
	va_list ap;

	if (p->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_info("peer %llu: %s: %s", (unsigned long long)p->id,
	    proto_error_name(code), msg);
	core_count_error(code);
	if ((ev = proto_event_error(code, msg)) != NULL) {
		peer_write(p, ev);
		free(ev);
	}
	peer_close_after_flush(p);
}

/*
 * (Re)start p's clock for its state: the handshake timeout until HELLO,
 * then the idle timeout while the peer is expected to send (READY, or
 * STREAMING while we read it). Listening, ending and paused peers have
 * none: they wait for us, not we for them.
 */
void
peer_timer(struct peer *p)
{
	struct timeval tv = { 0, 0 };

	if (p->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	if (p->state == PEER_NEW)
		tv.tv_sec = core.cfg.handshake_timeout_s;
	else if ((p->state == PEER_READY || p->state == PEER_STREAMING) &&
	    !(p->flags & PEER_PAUSED))
		tv.tv_sec = core.cfg.idle_timeout_s;
	p->timeout_s = (int)tv.tv_sec;
	if (tv.tv_sec > 0)
		evtimer_add(p->timer, &tv);
	else
		evtimer_del(p->timer);
}

static void
peer_timeout_cb(int fd, short ev, void *arg)
{
	struct peer *p = arg;

	if (p->state == PEER_NEW)
		peer_fail(p, PROTO_E_TIMEOUT, "no %s within %d s of "
		    "connecting (handshake_timeout_seconds)",
		    p->ops->greeting != NULL ? p->ops->greeting : "frame",
		    p->timeout_s);
	else
		peer_fail(p, PROTO_E_TIMEOUT, "no frame for %d s "
		    "(idle_timeout_seconds)", p->timeout_s);
}

void
peer_pause(struct peer *p, int on)
{
	if ((p->flags & (PEER_DEAD | PEER_CLOSING)) || (!on && core.draining))
		return;
	if (on) {
		p->flags |= PEER_PAUSED;
		bufferevent_disable(p->bev, EV_READ);
		peer_timer(p);
		return;
	}
	p->flags &= ~PEER_PAUSED;
	bufferevent_enable(p->bev, EV_READ);
	peer_timer(p);
	/* Frames already buffered are handled from the loop, not here. */
	bufferevent_trigger(p->bev, EV_READ, BEV_TRIG_IGNORE_WATERMARKS |
	    BEV_TRIG_DEFER_CALLBACKS);
}

size_t
peer_take_unread(struct peer *p)
{
	struct evbuffer *in = bufferevent_get_input(p->bev);
	evutil_socket_t fd = bufferevent_getfd(p->bev);
	size_t had = evbuffer_get_length(in);
	int n = 0, got;

	if (ioctl(fd, FIONREAD, &n) != 0 || n <= 0)
		return 0;
	/* A bufferevent keeps its input's end frozen to all but itself. */
	evbuffer_unfreeze(in, 0);
	while (n > 0 && (got = evbuffer_read(in, fd, n)) > 0)
		n -= got;
	evbuffer_freeze(in, 0);
	return evbuffer_get_length(in) - had;
}

/* The peer's session sent "end" (or the resume found it ended). */
void
peer_session_ended(struct peer *p)
{
	if (p->ops->ended != NULL) {
		p->ops->ended(p);
		return;
	}
	if (p->session != NULL)
		session_detach(p->session, p);
	if (core.draining || (p->flags & PEER_EOF))
		peer_close_after_flush(p);
	else if (p->state != PEER_SUBSCRIBED || p->session == NULL)
		p->state = PEER_READY;
	peer_timer(p);
}

static void
peer_read_cb(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;

	if (p->flags & PEER_CLOSING) {
		peer_linger_read(p, bufferevent_get_input(bev));
		return;
	}
	p->ops->read(p);
}

/*
 * SIGTERM: the door takes what a streaming client sent before the
 * signal (ops->drain), then nothing more is read.
 */
static void
peer_drain(struct peer *p)
{
	if (p->flags & (PEER_DEAD | PEER_CLOSING))
		return;
	if (p->ops->drain != NULL)
		p->ops->drain(p);
	peer_pause(p, 1);
}

/* SIGTERM: idle peers close now; the others are drained. */
void
peer_drain_all(void)
{
	struct peer *p, *next;

	TAILQ_FOREACH_SAFE(p, &peers, entry, next) {
		if (p->session == NULL && !(p->flags & PEER_BUSY))
			peer_close(p);
		else
			peer_drain(p);
	}
}

void
peer_close_all(void)
{
	struct peer *p;

	while ((p = TAILQ_FIRST(&peers)) != NULL)
		peer_close(p);
}

static void
peer_write_cb(struct bufferevent *bev, void *arg)
{
	struct peer *p = arg;

	if ((p->flags & PEER_CLOSING) &&
	    evbuffer_get_length(bufferevent_get_output(bev)) == 0)
		peer_flushed(p);
}

static void
peer_event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct peer *p = arg;

	if ((what & BEV_EVENT_EOF) && (what & BEV_EVENT_READING) &&
	    p->state == PEER_ENDING && !(p->flags & PEER_CLOSING)) {
		/* Half-closed after END: still send it the last finals. */
		p->flags |= PEER_EOF;
		bufferevent_disable(bev, EV_READ);
		return;
	}
	if ((what & BEV_EVENT_EOF) && evbuffer_get_length(
	    bufferevent_get_input(bev)) > 0 && !(p->flags & PEER_CLOSING)) {
		peer_fail(p, PROTO_E_BAD_FRAME, "connection closed inside a "
		    "frame (%zu bytes of it came)", evbuffer_get_length(
		    bufferevent_get_input(bev)));
		return;
	}
	if (what & BEV_EVENT_ERROR)
		log_debug("peer %llu: %s", (unsigned long long)p->id,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
	else if (what & BEV_EVENT_TIMEOUT)
		log_info("peer %llu: not reading; closed",
		    (unsigned long long)p->id);
	peer_close(p);
}
