/*
 * The Wyoming front door (Home Assistant): a TCP listener whose
 * connections are peers with their own ops (core/peer.h), so they share the
 * model, the compute thread, the sessions and their limits with socket
 * clients. This file reads and dispatches events (parsed by
 * wyoming-proto.c) and turns session events into Wyoming ones;
 * wyoming-utterance.c decodes an utterance's audio and answers it.
 *
 * Limits: a header line, and the data and payload after it, are each at
 * most max_event_bytes; reading stops while an event that large is
 * buffered. Anything malformed gets an error event and the connection is
 * closed once it is written (peer_fail), like a socket client's.
 * Events this server does not handle are ignored, as the protocol asks.
 */
#include <sys/socket.h>

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <json-c/json.h>

#include "listen-addr.h"
#include "log.h"
#include "wyoming.h"

#define WY_BACKLOG	64
#define WY_READ_SLACK	(64 * 1024)

static struct {
	struct evconnlistener	*listener;
} wy;

static void	wy_read(struct peer *);
static void	wy_session_event(struct peer *, const char *);
static void	wy_ended(struct peer *);
static void	wy_free(struct peer *);

static const struct peer_ops wy_ops = {
	.name = "wyoming",
	.greeting = "event",
	.read = wy_read,
	.write = wy_session_event,
	.ended = wy_ended,
	.free = wy_free,
	.linger = 1,
};

/* Queue an event line (consumed); NULL was out of memory. */
void
wy_send_raw(struct peer *p, char *line)
{
	if (line == NULL) {
		log_warnx("wyoming peer %llu: out of memory",
		    (unsigned long long)p->id);
		peer_close(p);
		return;
	}
	if (!(p->flags & (PEER_DEAD | PEER_CLOSING)) &&
	    evbuffer_add(bufferevent_get_output(p->bev), line,
	    strlen(line)) != 0)
		peer_close(p);
	free(line);
}

/* A reply, unless the client does not read what it has been sent. */
void
wy_send(struct peer *p, char *line)
{
	size_t queued;

	if (p->flags & (PEER_DEAD | PEER_CLOSING)) {
		free(line);
		return;
	}
	queued = evbuffer_get_length(bufferevent_get_output(p->bev));
	if (queued > core_config()->max_client_buffer_bytes) {
		free(line);
		peer_fail(p, PROTO_E_SLOW_READER, "%zu bytes of events not "
		    "read (server limit %zu)", queued,
		    core_config()->max_client_buffer_bytes);
		return;
	}
	wy_send_raw(p, line);
}

void
wy_send_text(struct peer *p, const char *type, const char *key,
    const char *value)
{
	const char *kv[2] = { key, value };

	wy_send(p, wy_write(type, kv, key != NULL ? 1 : 0));
}

static void
wy_send_info(struct peer *p)
{
	const char *langs[128];
	struct wy_info in;
	int i, n = 0;

	if (core_multilingual()) {
		for (i = 0; i < sotto_language_count(core_model()) &&
		    n < (int)(sizeof(langs) / sizeof(langs[0])); i++)
			if ((langs[n] = sotto_language_code(core_model(),
			    i)) != NULL)
				n++;
	} else
		langs[n++] = "en";
	in.program = "sotto";
	in.version = SOTTO_VERSION;
	in.url = SOTTO_URL;
	in.model = core_model_name();
	in.languages = langs;
	in.n_languages = n;
	wy_send(p, wy_write_info(&in));
}

/* transcribe's language: "en-US" is en; "" keeps the server's. */
static void
wy_transcribe(struct peer *p, struct wy_conn *c, const struct wy_event *ev)
{
	size_t i;

	if (c->flags & WY_OPEN)
		return peer_fail(p, PROTO_E_BAD_ORDER, "transcribe during an "
		    "utterance (after audio-start)");
	for (i = 0; ev->language[i] != '\0' && ev->language[i] != '-' &&
	    ev->language[i] != '_'; i++)
		c->language[i] = (char)tolower((unsigned char)ev->language[i]);
	c->language[i] = '\0';
	if (ev->name[0] != '\0' && strcmp(ev->name, core_model_name()) != 0)
		log_debug("wyoming peer %llu: model %s asked for, %s used",
		    (unsigned long long)p->id, ev->name, core_model_name());
}

static void
wy_dispatch(struct peer *p, struct wy_conn *c, const struct wy_event *ev,
    const uint8_t *payload, size_t len)
{
	switch (ev->kind) {
	case WY_DESCRIBE:
		wy_send_info(p);
		break;
	case WY_PING:
		wy_send_text(p, "pong", "text", ev->has_text ? ev->text :
		    NULL);
		break;
	case WY_TRANSCRIBE:
		wy_transcribe(p, c, ev);
		break;
	case WY_AUDIO_START:
		if (c->flags & WY_OPEN)
			return peer_fail(p, PROTO_E_BAD_ORDER, "audio-start "
			    "during an utterance");
		wy_open(p, c, ev);
		break;
	case WY_AUDIO_CHUNK:
		if ((c->flags & WY_OPEN) || wy_open(p, c, ev) == 0)
			wy_chunk(p, c, ev, payload, len);
		break;
	case WY_AUDIO_STOP:
		wy_audio_stop(p, c);
		break;
	case WY_SELECT_PROGRAM:
	case WY_UNKNOWN:
		log_debug("wyoming peer %llu: %s ignored",
		    (unsigned long long)p->id, ev->type);
		break;
	}
}

/*
 * Read the next header line into c: 1 read, 0 more bytes needed, -1
 * failed. Bytes already searched for the newline are not searched again.
 */
static int
wy_read_header(struct peer *p, struct wy_conn *c, struct evbuffer *in)
{
	size_t max = core_config()->wyoming_max_event_bytes, avail;
	struct evbuffer_ptr at;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	avail = evbuffer_get_length(in);
	if (evbuffer_ptr_set(in, &at, c->scanned, EVBUFFER_PTR_SET) != 0)
		return 0;
	at = evbuffer_search_eol(in, &at, NULL, EVBUFFER_EOL_LF);
	if (at.pos < 0) {
		c->scanned = avail;
		if (avail > max) {
			peer_fail(p, PROTO_E_TOO_LARGE, "a header line longer "
			    "than %zu bytes (max_event_bytes)", max);
			return -1;
		}
		return 0;
	}
	c->scanned = 0;
	if ((size_t)at.pos > max) {
		peer_fail(p, PROTO_E_TOO_LARGE, "a header line of %zu bytes "
		    "(max_event_bytes %zu)", (size_t)at.pos, max);
		return -1;
	}
	if ((c->line = malloc((size_t)at.pos + 1)) == NULL) {
		peer_fail(p, PROTO_E_INTERNAL, "out of memory");
		return -1;
	}
	c->line_len = (size_t)at.pos;
	evbuffer_remove(in, c->line, c->line_len);
	c->line[c->line_len] = '\0';
	evbuffer_drain(in, 1);
	if ((e = wy_header_parse(c->line, c->line_len, max, &c->hdr, msg)) !=
	    PROTO_OK) {
		peer_fail(p, e, "%s", msg);
		return -1;
	}
	return 1;
}

/* Parse and handle the event whose header is in c, its bytes at buf. */
static void
wy_event(struct peer *p, struct wy_conn *c, const uint8_t *buf)
{
	struct wy_event ev;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	e = wy_event_parse(c->line, c->line_len, buf, c->hdr.data_length,
	    &ev, msg);
	if (e != PROTO_OK)
		return peer_fail(p, e, "%s", msg);
	if (p->state == PEER_NEW)
		p->state = PEER_READY;	/* from now on, the idle timeout */
	wy_dispatch(p, c, &ev, buf + c->hdr.data_length,
	    c->hdr.payload_length);
}

static void
wy_read(struct peer *p)
{
	struct wy_conn *c = p->front;
	struct evbuffer *in = bufferevent_get_input(p->bev);
	size_t need;
	uint8_t *buf;

	while (!(p->flags & (PEER_DEAD | PEER_CLOSING | PEER_PAUSED)) &&
	    !(c->flags & WY_STOPPED)) {
		if (c->line == NULL && wy_read_header(p, c, in) != 1)
			break;
		need = c->hdr.data_length + c->hdr.payload_length;
		if (evbuffer_get_length(in) < need)
			break;
		buf = need > 0 ? evbuffer_pullup(in, (ssize_t)need) : NULL;
		if (need > 0 && buf == NULL) {
			peer_fail(p, PROTO_E_INTERNAL, "out of memory");
			break;
		}
		wy_event(p, c, buf);
		if (p->flags & PEER_DEAD)
			break;
		evbuffer_drain(in, need);
		free(c->line);
		c->line = NULL;
		peer_timer(p);
	}
}

struct peer *
wy_find(uint64_t id)
{
	struct peer *p = peer_find(id);

	return p != NULL && p->ops == &wy_ops ? p : NULL;
}

/* A final's text: its segments' joined; NULL when it has none. */
static char *
wy_final_text(struct json_object *o)
{
	struct json_object *segs, *seg, *t;
	size_t i, n, len = 0;
	char *s = NULL, *q;
	const char *x;

	if (!json_object_object_get_ex(o, "segments", &segs) ||
	    !json_object_is_type(segs, json_type_array))
		return NULL;
	n = json_object_array_length(segs);
	for (i = 0; i < n; i++) {
		seg = json_object_array_get_idx(segs, i);
		if (!json_object_object_get_ex(seg, "text", &t) ||
		    (x = json_object_get_string(t)) == NULL || *x == '\0')
			continue;
		if ((q = realloc(s, len + strlen(x) + 1)) == NULL) {
			free(s);
			return NULL;
		}
		s = q;
		memcpy(s + len, x, strlen(x) + 1);
		len += strlen(x);
	}
	return s;
}

/*
 * A closed caption unit is a transcript-chunk: the finals it holds (kept
 * by wy_keep_chunk), counted as sent.
 */
static void
wy_unit_chunk(struct peer *p, struct wy_conn *c, struct json_object *o)
{
	size_t have = c->chunks != NULL ? strlen(c->chunks) : 0;
	const char *text = json_object_get_string(json_object_object_get(o,
	    "text"));

	if (text == NULL || *text == '\0' || c->chunked >= have)
		return;
	wy_send_raw(p, wy_write("transcript-chunk",
	    (const char *[]){ "text", text }, 1));
	c->chunked += strlen(text);
	if (c->chunked > have)
		c->chunked = have;
}

/*
 * A session event (the sottod protocol's JSON, from peer.c): a final is
 * kept, a closed caption unit is a transcript-chunk, the detected
 * language kept for the transcript (answer = live), an error an error.
 */
static void
wy_session_event(struct peer *p, const char *json)
{
	struct json_object *o, *v;
	const char *type, *kv[4];
	char *text;

	if ((o = json_tokener_parse(json)) == NULL)
		return;
	if (!json_object_object_get_ex(o, "type", &v) ||
	    (type = json_object_get_string(v)) == NULL)
		type = "";
	if (strcmp(type, "final") == 0) {
		if ((text = wy_final_text(o)) != NULL)
			wy_keep_chunk(p, p->front, text);
		free(text);
	} else if (strcmp(type, "language") == 0 &&
	    json_object_object_get_ex(o, "language", &v))
		snprintf(((struct wy_conn *)p->front)->text_language,
		    PROTO_LANGUAGE_MAX, "%s", json_object_get_string(v));
	else if (strcmp(type, "unit") == 0 &&
	    json_object_get_boolean(json_object_object_get(o, "closed")))
		wy_unit_chunk(p, p->front, o);
	else if (strcmp(type, "error") == 0) {
		kv[0] = "text";
		kv[1] = json_object_object_get_ex(o, "message", &v) ?
		    json_object_get_string(v) : "error";
		kv[2] = "code";
		kv[3] = json_object_object_get_ex(o, "code", &v) ?
		    json_object_get_string(v) : NULL;
		wy_send_raw(p, wy_write("error", kv, 2));
	}
	json_object_put(o);
}

/*
 * The session ended: after audio-stop with answer = live, its finals
 * are the answer; before audio-stop (a drain ends every session), the
 * audio so far is the utterance.
 */
static void
wy_ended(struct peer *p)
{
	struct wy_conn *c = p->front;

	if (p->session != NULL)
		session_detach(p->session, p);
	if (c->flags & WY_LIVE)
		wy_answer_live(p, c);
	else if ((c->flags & WY_OPEN) && !(c->flags & WY_STOPPED))
		wy_stop(p, c);
}

static void
wy_free(struct peer *p)
{
	struct wy_conn *c = p->front;

	if (c == NULL)
		return;
	wy_reset(c);
	free(c->scratch);
	free(c->line);
	free(c);
}

/* Refuse fd with one error event, written only if it fits at once. */
static void
wy_refuse(evutil_socket_t fd, enum proto_error code, const char *text)
{
	const char *kv[4] = { "text", text, "code", proto_error_name(code) };
	char *line;

	if ((line = wy_write("error", kv, 2)) != NULL) {
		(void)send(fd, line, strlen(line), MSG_DONTWAIT |
		    MSG_NOSIGNAL);
		free(line);
	}
	evutil_closesocket(fd);
}

/*
 * Room for one more connection from fd's address: [wyoming]
 * max_connections for the door, max_connections_per_address for one
 * address. The Unix socket's connections are counted apart, so that a
 * flood on this port never locks local clients out. 0, or -1 with why.
 */
static int
wy_admit(evutil_socket_t fd, char *msg, size_t len)
{
	const struct config *cfg = core_config();
	char addr[PEER_ADDR_MAX];
	int n;

	if ((n = peer_count_door(&wy_ops)) >= cfg->wyoming_max_connections) {
		snprintf(msg, len, "all %d Wyoming connections are in use "
		    "([wyoming] max_connections = %d)", n,
		    cfg->wyoming_max_connections);
		return -1;
	}
	peer_addr(fd, addr);
	if ((n = peer_count_addr(&wy_ops, addr)) >=
	    cfg->wyoming_max_connections_per_address) {
		snprintf(msg, len, "%s already has %d Wyoming connections "
		    "([wyoming] max_connections_per_address = %d); close one "
		    "first", addr, n, cfg->wyoming_max_connections_per_address);
		return -1;
	}
	return 0;
}

static void
wy_accept_cb(struct evconnlistener *l, evutil_socket_t fd,
    struct sockaddr *sa, int len, void *arg)
{
	struct wy_conn *c;
	struct peer *p;
	char msg[PROTO_MSG_MAX];
	int one = 1;

	if (wy_admit(fd, msg, sizeof(msg)) != 0) {
		log_info("wyoming: refused: %s", msg);
		wy_refuse(fd, PROTO_E_TOO_MANY, msg);
		return;
	}
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		log_debug("wyoming: TCP_NODELAY: %s", strerror(errno));
	if ((c = calloc(1, sizeof(*c))) == NULL) {
		log_warnx("wyoming: accept: out of memory");
		evutil_closesocket(fd);
		return;
	}
	if ((p = peer_new(fd, -1, &wy_ops)) == NULL) {
		free(c);
		return;
	}
	p->front = c;
	p->flags |= PEER_NO_RESUME;
	/* No handshake, but the first event must come soon (NEW's timer). */
	p->state = PEER_NEW;
	peer_timer(p);
	bufferevent_setwatermark(p->bev, EV_READ, 0,
	    2 * core_config()->wyoming_max_event_bytes + WY_READ_SLACK);
	log_debug("wyoming peer %llu: connected", (unsigned long long)p->id);
}

static void
wy_accept_error_cb(struct evconnlistener *l, void *arg)
{
	log_warn("wyoming: accept");
}

/* A listener bound to addr (ADDRESS:PORT); NULL with err. */
static struct evconnlistener *
wy_bind(const char *addr, char *err, size_t errlen)
{
	struct evconnlistener *l;
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256];
	unsigned flags = LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC |
	    LEV_OPT_REUSEABLE;

	if (listen_addr_parse(addr, &ss, &len, msg, sizeof(msg)) != 0) {
		snprintf(err, errlen, "wyoming: %s", msg);
		return NULL;
	}
	if (ss.ss_family == AF_INET6)
		flags |= LEV_OPT_BIND_IPV6ONLY;
	if ((l = evconnlistener_new_bind(core_base(), wy_accept_cb, NULL,
	    flags, WY_BACKLOG, (struct sockaddr *)&ss, (int)len)) == NULL)
		snprintf(err, errlen, "wyoming: cannot listen on %s: %s", addr,
		    strerror(errno));
	return l;
}

static void	wyoming_drain(void);
static void	wyoming_stop(void);

static const struct door wyoming_door = {
	.name = "wyoming",
	.drain = wyoming_drain,
	.stop = wyoming_stop,
};

int
wyoming_start(const char *addr, int sfd, char *err, size_t errlen)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char bound[LISTEN_ADDR_MAX + 8];
	evutil_socket_t fd;

	if (sfd != -1) {	/* socket activation: sottod-wyoming.socket */
		if (*addr != '\0')
			log_info("wyoming: the socket from systemd replaces "
			    "listen = %s", addr);
		addr = "the socket from systemd";
		(void)evutil_make_socket_nonblocking(sfd);
		if ((wy.listener = evconnlistener_new(core_base(),
		    wy_accept_cb, NULL, LEV_OPT_CLOSE_ON_FREE |
		    LEV_OPT_CLOSE_ON_EXEC, WY_BACKLOG, sfd)) == NULL) {
			snprintf(err, errlen, "wyoming: cannot serve on the "
			    "socket from systemd (fd %d)", sfd);
			return -1;
		}
	} else if (*addr == '\0')
		return 0;
	else if ((wy.listener = wy_bind(addr, err, errlen)) == NULL)
		return -1;
	evconnlistener_set_error_cb(wy.listener, wy_accept_error_cb);
	fd = evconnlistener_get_fd(wy.listener);
	len = sizeof(ss);
	if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
		listen_addr_format((struct sockaddr *)&ss, bound,
		    sizeof(bound));
	else
		snprintf(bound, sizeof(bound), "%s", addr);
	core_door_add(&wyoming_door);
	log_info("wyoming: listening on %s", bound);
	return 0;
}

/* door.drain: no new connections. */
static void
wyoming_drain(void)
{
	if (wy.listener != NULL)
		evconnlistener_disable(wy.listener);
}

static void
wyoming_stop(void)
{
	if (wy.listener != NULL)
		evconnlistener_free(wy.listener);
	wy.listener = NULL;
}
