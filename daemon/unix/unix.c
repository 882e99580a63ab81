/*
 * The Unix socket: our own at [server] socket (a stale one left by a
 * crash is removed first, a live one is an error), or the one systemd
 * passes (socket activation), and who may connect.
 *
 * Accept: a connection over max_connections (busy) or over its uid's
 * max_connections_per_uid (too_many_connections; the uid comes from
 * SO_PEERCRED) gets one error event, written without waiting, and is
 * closed before it costs a peer. max_sessions (peer-dispatch.c) counts
 * streams apart, so a client can always ask STATUS while every session
 * is in use.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/listener.h>

#include "core.h"
#include "log.h"
#include "peer.h"
#include "unix.h"

#define UNIX_BACKLOG	64

static struct {
	struct evconnlistener	*listener;
	int			 own;	/* we made the socket at path */
	char			 path[sizeof(((struct config *)0)->socket_path)];
} ux;

/* The uid at the other end of fd, or -1 when the kernel does not say. */
static long
unix_peer_uid(evutil_socket_t fd)
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

/*
 * Refuse fd: one error event if the socket takes it at once (a new
 * connection's buffer is empty), then close. Nothing waits on it.
 */
static void
unix_refuse(evutil_socket_t fd, enum proto_error code, const char *msg)
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
unix_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int len, void *arg)
{
	const struct config *cfg = core_config();
	char msg[PROTO_MSG_MAX];
	long uid;
	int n;

	if ((n = peer_count_door(&unix_ops)) >= cfg->max_connections) {
		snprintf(msg, sizeof(msg), "all %d connections are in use "
		    "(max_connections = %d)", n, cfg->max_connections);
		log_warnx("accept: refused: %s", msg);
		unix_refuse(fd, PROTO_E_BUSY, msg);
		return;
	}
	uid = unix_peer_uid(fd);
	if ((n = peer_count_uid(&unix_ops, uid)) >=
	    cfg->max_connections_per_uid) {
		snprintf(msg, sizeof(msg), "uid %ld already has %d "
		    "connections (max_connections_per_uid = %d); close one "
		    "first", uid, n, cfg->max_connections_per_uid);
		log_info("accept: refused: %s", msg);
		unix_refuse(fd, PROTO_E_TOO_MANY, msg);
		return;
	}
	peer_new(fd, uid, &unix_ops);
}

static void
unix_accept_error_cb(struct evconnlistener *l, void *arg)
{
	log_warn("accept");
}

/*
 * Remove a stale socket at path: only a socket, and only when nobody
 * answers on it. Returns 0, or -1 with err.
 */
static int
unix_unlink_stale(const char *path, const struct sockaddr_un *sun,
    char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket", path);
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sun, sizeof(*sun));
	close(fd);
	if (rc == 0) {
		snprintf(err, errlen, "%s: another sottod is listening", path);
		return -1;
	}
	if (unlink(path) != 0) {
		snprintf(err, errlen, "%s: cannot remove the stale socket: %s",
		    path, strerror(errno));
		return -1;
	}
	log_info("removed stale socket %s", path);
	return 0;
}

/* A listening socket at path with mode; -1 with err. */
static int
unix_listen(const char *path, int mode, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path) >=
	    (int)sizeof(sun.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	err[0] = '\0';
	if (unix_unlink_stale(path, &sun, err, errlen) != 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0777 & ~(mode_t)mode);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    chmod(path, (mode_t)mode) != 0 ||
	    listen(fd, UNIX_BACKLOG) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		umask(old);
		close(fd);
		return -1;
	}
	umask(old);
	return fd;
}

/* door.reload: give our own socket the configured mode. */
static void
unix_reload(void)
{
	int mode = core_config()->socket_mode;
	struct stat st;

	if (!ux.own)
		return;
	if (lstat(ux.path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		log_warnx("reload: %s is no longer our socket; socket_mode "
		    "not applied", ux.path);
		return;
	}
	if ((st.st_mode & 0777) != (mode_t)mode &&
	    chmod(ux.path, (mode_t)mode) != 0)
		log_warn("reload: chmod %04o %s", mode, ux.path);
}

/* door.drain: no new connections. */
static void
unix_drain(void)
{
	if (ux.listener != NULL)
		evconnlistener_disable(ux.listener);
}

static void
unix_stop(void)
{
	if (ux.listener != NULL)
		evconnlistener_free(ux.listener);
	ux.listener = NULL;
	if (ux.own)
		unlink(ux.path);
	ux.own = 0;
}

static const struct door unix_door = {
	.name = "unix",
	.drain = unix_drain,
	.reload = unix_reload,
	.stop = unix_stop,
};

int
unix_start(int fd, char *err, size_t errlen)
{
	const struct config *cfg = core_config();

	snprintf(ux.path, sizeof(ux.path), "%s", cfg->socket_path);
	if (fd == -1) {
		if ((fd = unix_listen(ux.path, cfg->socket_mode, err,
		    errlen)) == -1)
			return -1;
		ux.own = 1;
	}
	evutil_make_socket_nonblocking(fd);
	ux.listener = evconnlistener_new(core_base(), unix_accept_cb, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, -1, fd);
	if (ux.listener == NULL) {
		snprintf(err, errlen, "cannot listen on fd %d", fd);
		close(fd);
		return -1;
	}
	evconnlistener_set_error_cb(ux.listener, unix_accept_error_cb);
	core_door_add(&unix_door);
	log_info("listening on %s%s", ux.own ? ux.path :
	    "the socket from systemd", ux.own ? "" : " (socket activation)");
	return 0;
}
