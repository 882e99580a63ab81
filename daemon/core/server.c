/*
 * The server: accepts connections on the listening socket (our own or
 * systemd's), turns signals into a graceful drain, brings worker results
 * back onto the loop, and keeps systemd informed (STATUS, WATCHDOG).
 *
 * Drain (SIGTERM, SIGINT): stop accepting; what streaming clients wrote
 * before the signal is read from their sockets and taken (peer_drain),
 * then nothing more; every stream with someone to tell is finished, its
 * last finals and "end" are sent, and then its connection is closed;
 * idle connections are closed at once. The loop ends when no session is
 * decoding and no connection is left. When shutdown_grace_seconds pass
 * first (or on a second signal) the compute thread stops and every
 * stream ends at once, its "end" saying how much of its audio was not
 * decoded; the loop then ends once that is written, at most
 * SERVER_ABORT_MAX_S later. A third signal ends it at once. SIGHUP reloads
 * the config (sottod_reload). Signals arrive as libevent events, so all
 * of this runs on the loop, never in a signal handler.
 *
 * Accept: a connection over max_connections (busy) or over its uid's
 * max_connections_per_uid (too_many_connections; the uid comes from
 * SO_PEERCRED) gets one error event, written without waiting, and is
 * closed before it costs a peer. These limits count connections of any
 * kind; max_sessions (peer.c) counts streams, so a client can always
 * ask STATUS while every session is in use.
 */
#include <sys/socket.h>
#include <sys/uio.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "http.h"
#include "log.h"
#include "systemd.h"
#include "sottod.h"

#define SERVER_STATUS_S		5
#define SERVER_ABORT_MAX_S	5	/* after the grace: flush, then exit */

static struct {
	struct evconnlistener	*listener;
	struct event		*sig[3];
	struct event		*wake;
	struct event		*status;
	struct event		*watchdog;
	struct event		*drain_timer;
	struct timeval		 watchdog_tv;
} server;

int
server_clients(void)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		n++;
	return n;
}

/* Connections of every front door count against one cap. */
int
server_full(void)
{
	return server_clients() >= sottod.cfg.max_connections;
}

/* The uid at the other end of fd, or -1 when the kernel does not say. */
static long
server_peer_uid(evutil_socket_t fd)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) != 0 ||
	    len != sizeof(cr)) {
		log_warn("accept: SO_PEERCRED");
		return -1;
	}
	return (long)cr.uid;
}

static int
server_uid_connections(long uid)
{
	struct peer *p;
	int n = 0;

	TAILQ_FOREACH(p, &peers, entry)
		if (p->uid == uid)
			n++;
	return n;
}

/*
 * Refuse fd: one error event if the socket takes it at once (a new
 * connection's buffer is empty), then close. Nothing waits on it.
 */
static void
server_refuse(evutil_socket_t fd, enum proto_error code, const char *msg)
{
	uint8_t hdr[PROTO_HEADER_BYTES];
	struct iovec iov[2];
	struct msghdr mh;
	char *ev;

	if ((ev = proto_event_error(code, msg)) != NULL) {
		proto_frame_header(hdr, MSG_EVENT, strlen(ev));
		iov[0].iov_base = hdr;
		iov[0].iov_len = sizeof(hdr);
		iov[1].iov_base = ev;
		iov[1].iov_len = strlen(ev);
		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = 2;
		(void)sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		free(ev);
	}
	evutil_closesocket(fd);
}

static void
server_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int len, void *arg)
{
	char msg[PROTO_MSG_MAX];
	long uid;
	int n;

	if ((n = server_clients()) >= sottod.cfg.max_connections) {
		snprintf(msg, sizeof(msg), "all %d connections are in use "
		    "(max_connections = %d)", n, sottod.cfg.max_connections);
		log_warnx("accept: refused: %s", msg);
		server_refuse(fd, PROTO_E_BUSY, msg);
		return;
	}
	uid = server_peer_uid(fd);
	if ((n = server_uid_connections(uid)) >=
	    sottod.cfg.max_connections_per_uid) {
		snprintf(msg, sizeof(msg), "uid %ld already has %d "
		    "connections (max_connections_per_uid = %d); close one "
		    "first", uid, n, sottod.cfg.max_connections_per_uid);
		log_info("accept: refused: %s", msg);
		server_refuse(fd, PROTO_E_TOO_MANY, msg);
		return;
	}
	peer_new(fd, uid, NULL);
}

static void
server_accept_error_cb(struct evconnlistener *l, void *arg)
{
	log_warn("accept");
}

static void
server_worker_cb(int fd, short ev, void *arg)
{
	struct worker_result *r;

	while ((r = worker_next_result()) != NULL) {
		if (r->kind == WORKER_FILE)
			worker_file_done(r->file);	/* its owner frees it */
		else
			session_result(r);
		worker_result_free(r);
	}
}

static void
server_status_cb(int fd, short ev, void *arg)
{
	systemd_notify_status("%d sessions, %d clients, lag %.1f s, "
	    "RTF %.2f", session_count(), server_clients(), session_max_lag(),
	    worker_step_seconds() * 1000.0 / sottod.cfg.step_ms);
}

static void
server_watchdog_cb(int fd, short ev, void *arg)
{
	systemd_notify_watchdog();
}

static void
server_exit_cb(int fd, short ev, void *arg)
{
	log_warnx("drain: clients still connected %d s after the streams "
	    "ended; exiting", SERVER_ABORT_MAX_S);
	event_base_loopexit(sottod.base, NULL);
}

/*
 * The grace is over (or a second signal): stop decoding, end every
 * stream now with what it did not decode, exit once that is written.
 */
static void
server_drain_abort(void)
{
	struct timeval tv = { SERVER_ABORT_MAX_S, 0 };

	sottod.draining = 2;
	log_warnx("drain: %d streams still decoding; ending them now, with "
	    "what they did not decode", session_busy());
	worker_abort();
	session_abort_all();
	if (server.drain_timer != NULL) {
		evtimer_del(server.drain_timer);
		evtimer_assign(server.drain_timer, sottod.base, server_exit_cb,
		    NULL);
		evtimer_add(server.drain_timer, &tv);
	}
	server_drain_check();
}

static void
server_drain_timeout_cb(int fd, short ev, void *arg)
{
	log_warnx("drain: still busy after %d s (shutdown_grace_seconds)",
	    sottod.cfg.shutdown_grace_s);
	server_drain_abort();
}

/* Exit the loop once a drain has nothing left to wait for. */
void
server_drain_check(void)
{
	if (sottod.draining && session_busy() == 0 && TAILQ_EMPTY(&peers) &&
	    http_busy() == 0)
		event_base_loopexit(sottod.base, NULL);
}

static void
server_drain(void)
{
	struct timeval tv = { sottod.cfg.shutdown_grace_s, 0 };
	struct peer *p, *next;

	log_info("draining: finishing %d streams", session_busy());
	sottod.draining = 1;
	systemd_notify_stopping();
	if (server.listener != NULL)
		evconnlistener_disable(server.listener);
	http_drain();
	wyoming_drain();
	session_mic_stop();
	TAILQ_FOREACH_SAFE(p, &peers, entry, next) {
		if (p->session == NULL && !(p->flags & PEER_BUSY))
			peer_close(p);
		else
			peer_drain(p);	/* what came before the signal */
	}
	session_drain_all();
	server.drain_timer = evtimer_new(sottod.base, server_drain_timeout_cb,
	    NULL);
	if (server.drain_timer != NULL)
		evtimer_add(server.drain_timer, &tv);
	server_drain_check();
}

static void
server_signal_cb(int sig, short ev, void *arg)
{
	if (sig == SIGHUP) {
		sottod_reload();
		return;
	}
	if (sottod.draining == 1) {
		log_info("second signal: ending the streams now");
		server_drain_abort();
		return;
	}
	if (sottod.draining) {
		log_info("third signal: exiting now");
		event_base_loopexit(sottod.base, NULL);
		return;
	}
	server_drain();
}

static int
server_timers(char *err, size_t errlen)
{
	struct timeval tv = { SERVER_STATUS_S, 0 };
	uint64_t usec;

	server.status = event_new(sottod.base, -1, EV_PERSIST,
	    server_status_cb, NULL);
	if (server.status == NULL || event_add(server.status, &tv) != 0)
		goto fail;
	if (!systemd_watchdog_interval_usec(&usec))
		return 0;
	server.watchdog_tv.tv_sec = (time_t)(usec / 2 / 1000000);
	server.watchdog_tv.tv_usec = (suseconds_t)(usec / 2 % 1000000);
	server.watchdog = event_new(sottod.base, -1, EV_PERSIST,
	    server_watchdog_cb, NULL);
	if (server.watchdog == NULL ||
	    event_add(server.watchdog, &server.watchdog_tv) != 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot set up timers");
	return -1;
}

/*
 * Set up the loop's events on the listening fd and start the compute
 * thread. Returns 0 or -1 with err.
 */
int
server_start(int listen_fd, char *err, size_t errlen)
{
	static const int sigs[] = { SIGTERM, SIGINT, SIGHUP };
	size_t i;

	for (i = 0; i < 3; i++) {
		server.sig[i] = evsignal_new(sottod.base, sigs[i],
		    server_signal_cb, NULL);
		if (server.sig[i] == NULL || event_add(server.sig[i], NULL)) {
			snprintf(err, errlen, "cannot handle signals");
			return -1;
		}
	}
	server.wake = event_new(sottod.base, -1, 0, server_worker_cb, NULL);
	if (server.wake == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (worker_start(server.wake, err, errlen) != 0)
		return -1;
	if (server_timers(err, errlen) != 0)
		return -1;
	evutil_make_socket_nonblocking(listen_fd);
	server.listener = evconnlistener_new(sottod.base, server_accept_cb,
	    NULL, LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1,
	    listen_fd);
	if (server.listener == NULL) {
		snprintf(err, errlen, "cannot listen on fd %d", listen_fd);
		return -1;
	}
	evconnlistener_set_error_cb(server.listener, server_accept_error_cb);
	return 0;
}

/* Close everything; the loop has ended. */
void
server_stop(void)
{
	struct peer *p;
	size_t i;

	while ((p = TAILQ_FIRST(&peers)) != NULL)
		peer_close(p);
	session_mic_stop();
	wyoming_stop();
	session_free_all();
	worker_stop();
	if (server.listener != NULL)
		evconnlistener_free(server.listener);
	for (i = 0; i < 3; i++)
		if (server.sig[i] != NULL)
			event_free(server.sig[i]);
	if (server.status != NULL)
		event_free(server.status);
	if (server.watchdog != NULL)
		event_free(server.watchdog);
	if (server.drain_timer != NULL)
		event_free(server.drain_timer);
	if (server.wake != NULL)
		event_free(server.wake);
}
