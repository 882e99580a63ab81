/*
 * The client end of the sottod socket: connect, queue frames, poll, and
 * cut received bytes into EVENT payloads with common/proto.c.
 */
#include <sys/socket.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "stream.h"

#define CONN_READ_BYTES		65536
#define CONN_MAX_EVENT_BYTES	(16 * 1024 * 1024)

const char *
conn_socket_path(const char *opt)
{
	const char *env = getenv("SOTTO_SOCKET");

	if (opt != NULL)
		return opt;
	if (env != NULL && *env != '\0')
		return env;
	return CONN_SOCKET_DEFAULT;
}

long long
conn_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
conn_queue(struct conn *c, uint8_t type, const void *p, size_t n)
{
	size_t need = c->out_len + PROTO_HEADER_BYTES + n, cap;
	uint8_t *q;

	if (c->wclosed)
		return 0;
	if (c->out_off > 0 && c->out_off == c->out_len)
		c->out_off = c->out_len = 0;
	need = c->out_len + PROTO_HEADER_BYTES + n;
	if (need > c->out_cap) {
		cap = need * 2;
		if ((q = realloc(c->out, cap)) == NULL)
			return -1;
		c->out = q;
		c->out_cap = cap;
	}
	proto_frame_header(c->out + c->out_len, type, n);
	if (n > 0)
		memcpy(c->out + c->out_len + PROTO_HEADER_BYTES, p, n);
	c->out_len = need;
	return 0;
}

size_t
conn_pending(const struct conn *c)
{
	return c->out_len - c->out_off;
}

/*
 * Why connect() failed, and what to do about it: the socket is someone
 * else's (permissions), nobody made it, or nobody listens on it.
 */
static void
conn_refused(const char *path, int e, char *err, size_t errlen)
{
	const char *hint;

	switch (e) {
	case EACCES:
	case EPERM:
		hint = "you may not use this socket: sottod.socket opens it "
		    "to root and the audio group (sudo usermod -aG audio "
		    "$USER, then log in again); SocketGroup= and SocketMode= "
		    "(systemctl edit sottod.socket), or socket_mode in "
		    "sottod.conf, change who may";
		break;
	case ENOENT:
		hint = "sottod is not running (systemctl enable --now "
		    "sottod.socket), or --socket or $SOTTO_SOCKET should "
		    "name another socket";
		break;
	case ECONNREFUSED:
		hint = "nothing listens on it: sottod stopped (systemctl "
		    "status sottod.socket sottod; journalctl -u sottod says "
		    "why)";
		break;
	default:
		hint = "--socket or $SOTTO_SOCKET name another socket";
		break;
	}
	snprintf(err, errlen, "cannot connect to sottod at %s: %s; %s", path,
	    strerror(e), hint);
}

const char *
conn_no_answer_hint(void)
{
	return "if systemd starts it (sottod.socket), it may have failed to "
	    "start: journalctl -u sottod says why (a model that is not "
	    "there, or a config error: sottod --check-config)";
}

int
conn_open(struct conn *c, const char *path, char *err, size_t errlen)
{
	static const char hello[] = "{\"protocol\":1,\"client\":\"sotto/"
	    SOTTO_VERSION "\"}";
	struct sockaddr_un sun;
	int e;

	memset(c, 0, sizeof(*c));
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path) >=
	    (int)sizeof(sun.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	if ((c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1 ||
	    connect(c->fd, (struct sockaddr *)&sun, sizeof(sun)) != 0) {
		e = errno;
		conn_refused(path, e, err, errlen);
		if (c->fd != -1)
			close(c->fd);
		c->fd = -1;
		return -1;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	return conn_queue(c, MSG_HELLO, hello, sizeof(hello) - 1);
}

void
conn_close(struct conn *c)
{
	if (c->fd != -1)
		close(c->fd);
	c->fd = -1;
	free(c->in);
	free(c->out);
	c->in = c->out = NULL;
}

static int
conn_write(struct conn *c, char *err, size_t errlen)
{
	ssize_t n;

	while (c->out_off < c->out_len) {
		n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
		    MSG_NOSIGNAL);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return 0;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			/* It stopped reading; its last events may follow. */
			c->wclosed = 1;
			c->out_off = c->out_len = 0;
			return 0;
		}
		if (n < 0) {
			snprintf(err, errlen, "sending to sottod: %s",
			    strerror(errno));
			return -1;
		}
		c->out_off += (size_t)n;
	}
	return 0;
}

static int
conn_read(struct conn *c, char *err, size_t errlen)
{
	ssize_t n;
	uint8_t *q;

	if (c->in_len + CONN_READ_BYTES > c->in_cap) {
		if ((q = realloc(c->in, c->in_len + CONN_READ_BYTES * 2)) ==
		    NULL) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
		c->in = q;
		c->in_cap = c->in_len + CONN_READ_BYTES * 2;
	}
	n = recv(c->fd, c->in + c->in_len, CONN_READ_BYTES, 0);
	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return 0;
	if (n < 0 && errno != ECONNRESET) {
		snprintf(err, errlen, "reading from sottod: %s",
		    strerror(errno));
		return -1;
	}
	if (n <= 0)
		c->eof = 1;
	else
		c->in_len += (size_t)n;
	return 0;
}

int
conn_poll(struct conn *c, int extra_fd, int timeout_ms, char *err,
    size_t errlen)
{
	struct pollfd pfd[2];
	int n = 1;

	pfd[0].fd = c->fd;
	pfd[0].events = (c->eof ? 0 : POLLIN) | (conn_pending(c) ? POLLOUT :
	    0);
	pfd[0].revents = 0;
	if (extra_fd >= 0) {
		pfd[1].fd = extra_fd;
		pfd[1].events = POLLIN;
		pfd[1].revents = 0;
		n = 2;
	}
	if (poll(pfd, (nfds_t)n, timeout_ms) < 0) {
		if (errno == EINTR)
			return 0;
		snprintf(err, errlen, "poll: %s", strerror(errno));
		return -1;
	}
	if ((pfd[0].revents & POLLOUT) && conn_write(c, err, errlen) != 0)
		return -1;
	if ((pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) && !c->eof &&
	    conn_read(c, err, errlen) != 0)
		return -1;
	return n == 2 && (pfd[1].revents & (POLLIN | POLLHUP)) ? 1 : 0;
}

const char *
conn_next_event(struct conn *c, size_t *ret_len, int *ret_bad)
{
	struct proto_frame f;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	size_t used;
	int rc;

	*ret_bad = 0;
	if (c->consumed > 0) {
		memmove(c->in, c->in + c->consumed, c->in_len - c->consumed);
		c->in_len -= c->consumed;
		c->consumed = 0;
	}
	rc = proto_frame_parse(c->in, c->in_len, CONN_MAX_EVENT_BYTES, &f,
	    &used, &e, msg);
	if (rc == 0)
		return NULL;
	if (rc < 0 || f.type != MSG_EVENT) {
		fprintf(stderr, "sotto: bad frame from sottod: %s\n", rc < 0 ?
		    msg : "not an EVENT");
		*ret_bad = 1;
		return NULL;
	}
	/* The type byte is spent: move the payload back one and end it. */
	memmove(c->in + 4, f.payload, f.len);
	c->in[4 + f.len] = '\0';
	*ret_len = f.len;
	c->consumed = used;
	c->answered = 1;
	return (const char *)c->in + 4;
}
