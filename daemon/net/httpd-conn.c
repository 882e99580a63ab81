/*
 * Every HTTP connection, between the socket and evhttp (docs/http.md,
 * "Limits").
 *
 * evhttp_set_bevcb lets us choose the bufferevent evhttp reads and
 * writes: a filter over a socket bufferevent, whose context is a struct
 * httpd_conn. The filter's free callback says when evhttp lets the
 * connection go, so the connections of the listener and of each peer
 * address are counted ([http] max_connections and
 * max_connections_per_address, with the WebSockets taken over from it:
 * ws-upgrade.c; over either, a 503 is written at once and the
 * connection closed). Its input filter sees each request's
 * header block before evhttp does, and holds it back until it is whole:
 * httpd-head.c checks it (a body without the token is refused with a
 * 401 before any of it is read, ...), and it must come within
 * header_timeout_seconds; then the block and the body evhttp reads
 * after it (Content-Length, or chunked until evhttp hands the request
 * to its route) are handed on, the body at min_body_bytes_per_second or
 * more (after header_timeout_seconds of grace). evhttp stays the HTTP
 * parser; it reads the same bytes in the same order.
 *
 * A refusal is written straight to the socket (it is the first thing
 * written on it), the sending side shut down, and what the client sends
 * meanwhile thrown away, for at most HTTP_CONN_LINGER_S and
 * HTTP_CONN_LINGER_BYTES (so that a client still sending reads the
 * status rather than a reset, without sottod reading a whole upload);
 * then evhttp is told the connection failed, and frees it. The connection
 * refused for being over a limit is closed at once.
 *
 * Output: a filter's output reaches evhttp's write callback as soon as
 * the filter has passed it on, before it is written, and evhttp then
 * frees a "Connection: close" connection with its reply still in the
 * socket bufferevent. So what evhttp writes is sent from its own
 * buffer by an event of ours (httpd_conn_write: on the loop's turn it
 * was added in, then whenever the socket is writable), and evhttp's
 * write callback is called when it is all written, as the socket
 * bufferevent would. The same buffer's callback turns evhttp's error
 * pages into JSON (httpd-page.c). After each reply, the memory of a
 * big upload is given back (core_trim_memory).
 */
#include <sys/socket.h>
#include <sys/types.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>

#include "core.h"
#include "httpd.h"
#include "httpd-head.h"
#include "httpd-private.h"
#include "log.h"
#include "peer.h"
#include "tailq.h"
#include "ws-upgrade.h"

/*
 * What may wait in the socket's input, and in evhttp's, unread: evhttp
 * takes a body once it is all there, so its input holds a whole
 * request; more (a client that sends on while its reply is written)
 * waits in the socket.
 */
#define HTTP_CONN_SOCK_IN_MAX	(HTTPD_HEAD_MAX + 32 * 1024)
#define HTTP_CONN_IN_SLACK	(2 * HTTPD_HEAD_MAX)
/* A refused client's bytes thrown away, at most, before closing. */
#define HTTP_CONN_LINGER_S	1.0
#define HTTP_CONN_LINGER_BYTES	(256 * 1024)
/* Give freed memory back after a connection handed on this much. */
#define HTTP_CONN_TRIM_BYTES	(1024 * 1024)

struct httpd_conn {
	TAILQ_ENTRY(httpd_conn)	 entry;
	struct bufferevent	*bev;		/* the filter evhttp has */
	struct bufferevent	*sock;		/* the socket under it */
	evutil_socket_t		 fd;		/* -1 before the start */
	char			 addr[PEER_ADDR_MAX];	/* the client's */
	struct event		*timer;		/* start, deadlines, linger */
	struct event		*wev;		/* evhttp's output */
	int			 started;
	int			 counted;	/* in httpd_n_conns */
	int			 refused;	/* the status sent, or 0 */
	double			 linger_until;
	size_t			 lingered;	/* bytes thrown away */
	/* the request being read */
	double			 head_t0;	/* its first byte; 0: none */
	size_t			 scanned;	/* of its header block */
	size_t			 head_left;	/* checked, to hand on */
	uint64_t		 body_left;	/* Content-Length to hand on */
	int			 chunked;	/* hand on until the route */
	double			 body_t0;	/* 0: no body being read */
	uint64_t		 body_got;
	uint64_t		 bytes_in;	/* handed on, since a trim */
};

static void	httpd_conn_write(evutil_socket_t, short, void *);
static void	httpd_conn_trim(struct httpd_conn *);

static TAILQ_HEAD(, httpd_conn) httpd_conns =
    TAILQ_HEAD_INITIALIZER(httpd_conns);
/* Connections let in: not those refused for being over a limit. */
static int httpd_n_conns;
static int httpd_n_all;

int
httpd_conn_count(void)
{
	return httpd_n_all;
}

int
httpd_connections(void)
{
	return httpd_n_conns;
}

/* Whether evhttp still has the connection (it clears the callbacks). */
static int
httpd_conn_alive(struct httpd_conn *c, bufferevent_event_cb *ecb,
    void **arg)
{
	bufferevent_getcb(c->bev, NULL, NULL, ecb, arg);
	return *ecb != NULL;
}

/*
 * Tell evhttp the connection failed, as the socket would: it frees it
 * (never from inside evhttp's own calls: from our events only).
 */
static void
httpd_conn_abort(struct httpd_conn *c, short what)
{
	bufferevent_event_cb ecb;
	void *arg;

	if (httpd_conn_alive(c, &ecb, &arg))
		ecb(c->bev, what | BEV_EVENT_ERROR, arg);
}

/* The deadline of what is being read now, or 0. */
static double
httpd_conn_deadline(const struct httpd_conn *c)
{
	const struct config *cfg = core_config();
	size_t waiting;
	uint64_t got;

	if (c->body_t0 != 0) {
		if (cfg->http_min_body_rate == 0)
			return 0;
		/* what the socket brought and evhttp has not taken yet */
		waiting = evbuffer_get_length(bufferevent_get_input(c->sock));
		got = c->body_got + (c->chunked || waiting < c->body_left ?
		    waiting : c->body_left);
		return c->body_t0 + cfg->http_header_timeout_s +
		    (double)got / (double)cfg->http_min_body_rate;
	}
	if (c->head_t0 != 0)
		return c->head_t0 + cfg->http_header_timeout_s;
	return 0;
}

/* Set the timer to the next deadline (none: off). */
static void
httpd_conn_arm(struct httpd_conn *c)
{
	double at = c->refused ? c->linger_until : httpd_conn_deadline(c),
	    dt = at - core_now();
	struct timeval tv;

	if (at == 0) {
		evtimer_del(c->timer);
		return;
	}
	if (dt < 0)
		dt = 0;
	tv.tv_sec = (time_t)dt;
	tv.tv_usec = (suseconds_t)((dt - (double)tv.tv_sec) * 1e6);
	evtimer_add(c->timer, &tv);
}

/* The request is read: no deadline until the next one's first byte. */
static void
httpd_conn_idle(struct httpd_conn *c)
{
	c->head_t0 = c->body_t0 = 0;
	c->chunked = 0;
	evtimer_del(c->timer);
}

/*
 * Refuse the connection's request: the reply goes straight to the
 * socket, nothing of it having been written yet; then linger seconds of
 * throwing input away, and evhttp frees the connection.
 */
static void
httpd_conn_refuse(struct httpd_conn *c, int status, const char *type,
    const char *code, double linger, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static void
httpd_conn_refuse(struct httpd_conn *c, int status, const char *type,
    const char *code, double linger, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_info("http: connection refused (%d): %s", status, msg);
	c->refused = status;
	c->linger_until = core_now() + linger;
	httpd_count_reply(status);
	/* a reply of evhttp's still going out (pipelined): not inside it */
	if (evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		httpd_page_send(c->fd, status, type, code, msg);
	(void)shutdown(c->fd, SHUT_WR);
	httpd_conn_arm(c);
}

/* Other connections from c's address. */
static int
httpd_conn_same_peer(const struct httpd_conn *c)
{
	const struct httpd_conn *o;
	int n = 0;

	TAILQ_FOREACH(o, &httpd_conns, entry)
		if (o != c && o->counted && strcmp(o->addr, c->addr) == 0)
			n++;
	return n;
}

/*
 * evhttp has set the socket up (the loop's first turn after the accept):
 * count the connection against the limits, start the first request's
 * deadline.
 */
static void
httpd_conn_start(struct httpd_conn *c)
{
	const struct config *cfg = core_config();
	int same;

	c->started = 1;
	if ((c->fd = bufferevent_getfd(c->bev)) < 0 ||
	    (c->wev = event_new(core_base(), c->fd, EV_WRITE,
	    httpd_conn_write, c)) == NULL) {
		log_warnx("http: a new connection: %s", strerror(errno));
		if (c->fd >= 0)
			httpd_conn_refuse(c, 503, "server_error", NULL, 0,
			    "out of memory");
		return;
	}
	/* its output is empty for good: ours is written by c->wev */
	(void)bufferevent_disable(c->sock, EV_WRITE);
	c->head_t0 = core_now();
	if (httpd_n_conns + ws_upgrade_count(NULL) >=
	    cfg->http_max_connections) {
		httpd_conn_refuse(c, 503, "server_error",
		    "too_many_connections", 0, "too many HTTP connections "
		    "(max_connections = %d); try again",
		    cfg->http_max_connections);
		return;
	}
	/* "" for a socket without one: all such count as one address */
	peer_addr(c->fd, c->addr);
	if ((same = httpd_conn_same_peer(c) + ws_upgrade_count(c->addr)) >=
	    cfg->http_max_connections_per_address) {
		httpd_conn_refuse(c, 503, "server_error",
		    "too_many_connections", 0, "too many HTTP connections from "
		    "this address (max_connections_per_address = %d); try "
		    "again", cfg->http_max_connections_per_address);
		return;
	}
	c->counted = 1;
	httpd_n_conns++;
	httpd_conn_arm(c);
}

static void
httpd_conn_timer(evutil_socket_t fd, short what, void *arg)
{
	struct httpd_conn *c = arg;
	const struct config *cfg = core_config();
	double at;

	(void)fd;
	(void)what;
	if (!c->started) {
		httpd_conn_start(c);
		return;
	}
	if (c->refused) {
		if (core_now() >= c->linger_until)
			httpd_conn_abort(c, BEV_EVENT_READING);
		else
			httpd_conn_arm(c);
		return;
	}
	if ((at = httpd_conn_deadline(c)) == 0)
		return;
	if (core_now() < at)
		httpd_conn_arm(c);
	else if (c->body_t0 != 0)
		httpd_conn_refuse(c, 408, "invalid_request_error",
		    "request_timeout", HTTP_CONN_LINGER_S, "the request body "
		    "came slower than min_body_bytes_per_second (%zu bytes a "
		    "second, after %d s)", cfg->http_min_body_rate,
		    cfg->http_header_timeout_s);
	else
		httpd_conn_refuse(c, 408, "invalid_request_error",
		    "request_timeout", HTTP_CONN_LINGER_S, "the request line "
		    "and headers did not come within header_timeout_seconds "
		    "(%d s)", cfg->http_header_timeout_s);
}

/*
 * The header block at the front of src: 0 when it is whole and checked
 * (c->head_left and the body to hand on are set), -1 while it is not
 * whole or when it was refused.
 */
static int
httpd_conn_head(struct httpd_conn *c, struct evbuffer *src)
{
	struct httpd_head_rules rules = {
		.token = core_config()->http_token,
		.max_body = core_config()->http_max_request_bytes,
		.open = httpd_open_paths(),
	};
	size_t n = evbuffer_get_length(src), end;
	struct httpd_head h;
	const char *p;

	if (n > HTTPD_HEAD_MAX)
		n = HTTPD_HEAD_MAX;
	if (c->head_t0 == 0) {		/* the first byte of this request */
		c->head_t0 = core_now();
		httpd_conn_arm(c);
	}
	if ((p = (const char *)evbuffer_pullup(src, (ev_ssize_t)n)) == NULL) {
		httpd_conn_refuse(c, 503, "server_error", NULL, 0, "out of "
		    "memory");
		return -1;
	}
	if ((end = httpd_head_end(p, n, c->scanned)) == 0) {
		c->scanned = n;
		if (n == HTTPD_HEAD_MAX)
			httpd_conn_refuse(c, 400, "invalid_request_error",
			    "bad_request", HTTP_CONN_LINGER_S, "the request "
			    "line and headers are over %d KiB",
			    HTTPD_HEAD_MAX / 1024);
		return -1;
	}
	c->scanned = 0;
	if (httpd_head_check(p, end, &rules, &h) != 0) {
		httpd_conn_refuse(c, h.status, "invalid_request_error", h.code,
		    HTTP_CONN_LINGER_S, "%s", h.msg);
		return -1;
	}
	c->head_left = end;
	c->body_left = h.body == HTTPD_BODY_LENGTH ? h.length : 0;
	c->chunked = h.body == HTTPD_BODY_CHUNKED;
	return 0;
}

/* k bytes were handed on: where the request is now. */
static void
httpd_conn_moved(struct httpd_conn *c, size_t k)
{
	c->bytes_in += k;
	if (c->head_left > 0) {
		c->head_left -= k;
		if (c->head_left > 0)
			return;
		if (c->body_left == 0 && !c->chunked) {
			httpd_conn_idle(c);
			return;
		}
		c->body_t0 = core_now();	/* the body's clock */
		c->body_got = 0;
		httpd_conn_arm(c);
		return;
	}
	c->body_got += k;
	if (!c->chunked && (c->body_left -= k) == 0)
		httpd_conn_idle(c);
}

/*
 * The input filter: from the socket's input (src) to evhttp's (dst), at
 * most limit bytes (evhttp's input has room for; -1: any).
 */
static enum bufferevent_filter_result
httpd_conn_in(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	struct httpd_conn *c = arg;
	size_t moved = 0, n, k;

	(void)mode;
	if (!c->started)
		httpd_conn_start(c);
	for (;;) {
		n = evbuffer_get_length(src);
		if (c->refused) {
			evbuffer_drain(src, n);
			if ((c->lingered += n) >= HTTP_CONN_LINGER_BYTES &&
			    c->linger_until > 0) {
				c->linger_until = 0;	/* enough: close */
				event_active(c->timer, EV_TIMEOUT, 0);
			}
			break;
		}
		if (n == 0 || (limit >= 0 && moved >= (size_t)limit))
			break;
		if (c->head_left == 0 && c->body_left == 0 && !c->chunked &&
		    httpd_conn_head(c, src) != 0)
			break;
		k = n;
		if (limit >= 0 && k > (size_t)limit - moved)
			k = (size_t)limit - moved;
		if (c->head_left > 0 && k > c->head_left)
			k = c->head_left;
		else if (c->head_left == 0 && !c->chunked && k > c->body_left)
			k = (size_t)c->body_left;
		if (evbuffer_remove_buffer(src, dst, k) != (int)k)
			return BEV_ERROR;
		moved += k;
		httpd_conn_moved(c, k);
	}
	return moved > 0 ? BEV_OK : BEV_NEED_MORE;
}

/* The output filter passes nothing on: httpd_conn_write sends it. */
static enum bufferevent_filter_result
httpd_conn_out(struct evbuffer *src, struct evbuffer *dst, ev_ssize_t limit,
    enum bufferevent_flush_mode mode, void *arg)
{
	(void)src;
	(void)dst;
	(void)limit;
	(void)mode;
	(void)arg;
	return BEV_NEED_MORE;
}

/*
 * An upload is read by libevent into buffers of a few KiB each; freed,
 * they stay in malloc's arena: give them back once a connection has
 * handed on HTTP_CONN_TRIM_BYTES.
 */
static void
httpd_conn_trim(struct httpd_conn *c)
{
	if (c->bytes_in < HTTP_CONN_TRIM_BYTES)
		return;
	c->bytes_in = 0;
	core_trim_memory();
}

/* The socket can take more of what evhttp wrote. */
static void
httpd_conn_write(evutil_socket_t fd, short what, void *arg)
{
	struct httpd_conn *c = arg;
	struct evbuffer *out = bufferevent_get_output(c->bev);
	bufferevent_event_cb ecb;
	void *cbarg;
	int n;

	(void)what;
	if (!httpd_conn_alive(c, &ecb, &cbarg) || c->refused ||
	    !(bufferevent_get_enabled(c->bev) & EV_WRITE))
		return;		/* the next reply's bytes call it again */
	if (evbuffer_get_length(out) > 0) {
		n = evbuffer_write(out, fd);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
		    errno != EINTR) {
			ecb(c->bev, BEV_EVENT_WRITING | BEV_EVENT_ERROR, cbarg);
			return;
		}
		/* progress: evhttp's write timeout starts again */
		if (n > 0)
			(void)bufferevent_enable(c->bev, EV_WRITE);
	}
	if (evbuffer_get_length(out) > 0) {
		event_add(c->wev, NULL);
		return;
	}
	/* evhttp's reply is sent: it frees its request, and the upload */
	bufferevent_trigger(c->bev, EV_WRITE, 0);
	httpd_conn_trim(c);
}

/* evhttp added to its output: JSON for its error pages; send it. */
static void
httpd_conn_output(struct evbuffer *out, const struct evbuffer_cb_info *info,
    void *arg)
{
	struct httpd_conn *c = arg;

	if (info->n_added == 0)
		return;
	httpd_page_rewrite(out, info);
	/*
	 * Write on this turn of the loop, before the socket is read again:
	 * a client that sent its request and shut its side down would
	 * otherwise have its end of input read first, and evhttp free the
	 * connection with the reply unsent.
	 */
	if (c->wev != NULL && !c->refused)
		event_active(c->wev, EV_WRITE, 0);
}

/* The filter's free callback: evhttp has let the connection go. */
static void
httpd_conn_free(void *arg)
{
	struct httpd_conn *c = arg;

	TAILQ_REMOVE(&httpd_conns, c, entry);
	httpd_n_all--;
	if (c->counted)
		httpd_n_conns--;
	if (c->timer != NULL)
		event_free(c->timer);
	if (c->wev != NULL)
		event_free(c->wev);
	httpd_conn_trim(c);
	free(c);
}

/* evhttp_set_bevcb: a new connection's filter, over its socket's. */
struct bufferevent *
httpd_conn_bev(struct event_base *base, void *arg)
{
	struct httpd_conn *c;

	(void)arg;
	if ((c = calloc(1, sizeof(*c))) == NULL)
		return NULL;
	c->fd = -1;
	if ((c->timer = evtimer_new(base, httpd_conn_timer, c)) == NULL ||
	    (c->sock = bufferevent_socket_new(base, -1,
	    BEV_OPT_CLOSE_ON_FREE)) == NULL) {
		if (c->timer != NULL)
			event_free(c->timer);
		free(c);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&httpd_conns, c, entry);
	httpd_n_all++;
	/* from here on, freeing the filter frees c and the socket's */
	if ((c->bev = bufferevent_filter_new(c->sock, httpd_conn_in,
	    httpd_conn_out, BEV_OPT_CLOSE_ON_FREE, httpd_conn_free,
	    c)) == NULL) {
		bufferevent_free(c->sock);
		TAILQ_REMOVE(&httpd_conns, c, entry);
		httpd_n_all--;
		event_free(c->timer);
		free(c);
		return NULL;
	}
	bufferevent_setwatermark(c->sock, EV_READ, 0, HTTP_CONN_SOCK_IN_MAX);
	bufferevent_setwatermark(c->bev, EV_READ, 0,
	    core_config()->http_max_request_bytes + HTTP_CONN_IN_SLACK);
	if (evbuffer_add_cb(bufferevent_get_output(c->bev), httpd_conn_output,
	    c) == NULL) {
		bufferevent_free(c->bev);
		return NULL;
	}
	/* the socket is evhttp's once this returns: start on the next turn */
	event_active(c->timer, EV_TIMEOUT, 0);
	return c->bev;
}

void
httpd_conn_request(struct evhttp_request *req)
{
	struct evhttp_connection *evcon = evhttp_request_get_connection(req);
	struct bufferevent *bev;
	struct httpd_conn *c;

	if (evcon == NULL ||
	    (bev = evhttp_connection_get_bufferevent(evcon)) == NULL)
		return;
	TAILQ_FOREACH(c, &httpd_conns, entry)
		if (c->bev == bev) {
			if (c->chunked)
				httpd_conn_idle(c);
			return;
		}
}
