/*
 * The HTTP listener's socket: opened on [http] listen (or passed in by
 * systemd) and handed to evhttp through an evconnlistener of our own, so
 * that accept(2) failing is ours to handle.
 *
 * Out of descriptors (EMFILE, ENFILE) or memory, accept(2) fails with
 * the connection still queued; the socket stays readable and libevent
 * would call accept again at once, in a loop that logs one line per
 * try. The listener is paused instead, for HTTP_LISTEN_PAUSE_S at a
 * time, and one line is logged for the whole episode, which ends when a
 * pause's end is followed by HTTP_LISTEN_PAUSE_S without a failure. [http] max_connections keeps the listener's own
 * connections under the limit; the episode comes from everything else
 * that holds descriptors.
 */
#include <sys/socket.h>
#include <netinet/in.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/listener.h>

#include "core.h"
#include "httpd-private.h"
#include "listen-addr.h"
#include "log.h"

#define HTTP_LISTEN_BACKLOG	64
#define HTTP_LISTEN_PAUSE_S	1

static struct {
	struct evconnlistener	*lev;		/* evhttp frees it */
	struct event		*tick;		/* a pause's end; the check */
	int			 episode;	/* failing, since its log */
	int			 failed;	/* since the last tick */
	unsigned long		 pauses;	/* of this episode */
	double			 since;
} listen_state;

int
httpd_listen_open(const char *addr, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256];
	int fd, on = 1;

	if (listen_addr_parse(addr, &ss, &len, msg, sizeof(msg)) != 0) {
		snprintf(err, errlen, "http: %s", msg);
		return -1;
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK,
	    0);
	if (fd == -1) {
		snprintf(err, errlen, "http: socket: %s", strerror(errno));
		return -1;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	if (ss.ss_family == AF_INET6)
		(void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on,
		    sizeof(on));
	if (bind(fd, (struct sockaddr *)&ss, len) != 0 ||
	    listen(fd, HTTP_LISTEN_BACKLOG) != 0) {
		snprintf(err, errlen, "http: cannot listen on %s: %s", addr,
		    strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Every HTTP_LISTEN_PAUSE_S of an episode: accept again; the episode is
 * over when nothing failed since the last tick.
 */
static void
httpd_listen_tick(evutil_socket_t fd, short what, void *arg)
{
	struct timeval tv = { HTTP_LISTEN_PAUSE_S, 0 };

	(void)fd;
	(void)what;
	(void)arg;
	if (listen_state.lev == NULL)
		return;
	if (evconnlistener_enable(listen_state.lev) != 0)
		log_warnx("http: cannot resume accepting connections");
	if (!listen_state.failed) {
		log_info("http: accepting connections again after %.0f s (%lu "
		    "pauses)", core_now() - listen_state.since,
		    listen_state.pauses);
		listen_state.episode = 0;
		listen_state.pauses = 0;
		return;
	}
	listen_state.failed = 0;
	evtimer_add(listen_state.tick, &tv);
}

/* accept(2) failed with something other than EAGAIN or EINTR. */
static void
httpd_listen_error(struct evconnlistener *lev, void *arg)
{
	struct timeval tv = { HTTP_LISTEN_PAUSE_S, 0 };
	int e = errno;

	(void)arg;
	if (evconnlistener_disable(lev) != 0 || listen_state.tick == NULL ||
	    (!listen_state.episode &&
	    evtimer_add(listen_state.tick, &tv) != 0)) {
		log_warnx("http: accept: %s; cannot pause the listener",
		    strerror(e));
		return;
	}
	listen_state.failed = 1;
	listen_state.pauses++;
	if (listen_state.episode)
		return;
	listen_state.episode = 1;
	listen_state.since = core_now();
	log_warnx("http: accept: %s (%d HTTP connections): not accepting "
	    "connections for %d s at a time until it passes", strerror(e),
	    httpd_conn_count(), HTTP_LISTEN_PAUSE_S);
}

struct evhttp_bound_socket *
httpd_listen_bind(struct evhttp *http, int fd)
{
	struct evhttp_bound_socket *bound;

	if ((listen_state.tick = evtimer_new(core_base(), httpd_listen_tick,
	    NULL)) == NULL) {
		close(fd);
		return NULL;
	}
	/* backlog 0: fd listens already */
	if ((listen_state.lev = evconnlistener_new(core_base(), NULL, NULL,
	    LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_CLOSE_ON_FREE, 0, fd)) == NULL) {
		close(fd);
		httpd_listen_stop();
		return NULL;
	}
	if ((bound = evhttp_bind_listener(http, listen_state.lev)) == NULL) {
		evconnlistener_free(listen_state.lev);	/* closes fd */
		httpd_listen_stop();
		return NULL;
	}
	evconnlistener_set_error_cb(listen_state.lev, httpd_listen_error);
	return bound;
}

void
httpd_listen_stop(void)
{
	if (listen_state.tick != NULL)
		event_free(listen_state.tick);
	memset(&listen_state, 0, sizeof(listen_state));
}
