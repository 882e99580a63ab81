/*
 * The sottod protocol's frames from one client (its socket, or a front
 * door's messages): each is checked against the peer's state (HELLO,
 * then OPEN or SUBSCRIBE, AUDIO and END while streaming; STATUS at any
 * time after HELLO) and handed to its handler, which answers with an
 * event or fails the peer with an error event (peer.c closes it).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-private.h"
#include "log.h"
#include "peer.h"
#include "session.h"

static void
peer_dispatch_hello(struct peer *p, const struct proto_frame *f)
{
	struct msg_hello m;
	enum proto_error e;
	char msg[PROTO_MSG_MAX], *ev;

	if ((e = proto_parse_hello(f->payload, f->len, &m, msg)) != PROTO_OK)
		return peer_fail(p, e, "HELLO: %s", msg);
	if (m.protocol != SOTTO_PROTO_VERSION)
		return peer_fail(p, PROTO_E_VERSION, "protocol %d is not "
		    "supported; this server speaks %d", m.protocol,
		    SOTTO_PROTO_VERSION);
	if (core.draining)
		return peer_fail(p, PROTO_E_SHUTDOWN, "sottod is stopping");
	log_debug("peer %llu: hello from %s", (unsigned long long)p->id,
	    m.client[0] ? m.client : "?");
	ev = proto_event_hello(SOTTOD_SERVER_NAME, core.model_name);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
	p->state = PEER_READY;
}

static void
peer_dispatch_resume(struct peer *p, const struct msg_open *m)
{
	struct session *s;

	if ((s = session_find(m->session)) == NULL)
		return peer_fail(p, PROTO_E_NO_SESSION, "no session %s (it "
		    "ended more than %d s ago, or never was)", m->session,
		    core.cfg.reconnect_grace_s);
	if (session_in_use(s))
		return peer_fail(p, PROTO_E_BAD_ORDER, "session %s is in use "
		    "by another connection", m->session);
	session_attach(s, p, m->since, m->since_unit);
}

static void
peer_dispatch_open(struct peer *p, const struct proto_frame *f)
{
	struct msg_open m;
	struct session *s;
	enum proto_error e;
	char msg[PROTO_MSG_MAX], *ev;

	if ((e = proto_parse_open(f->payload, f->len, &m, msg)) != PROTO_OK)
		return peer_fail(p, e, "OPEN: %s", msg);
	if (m.session[0] != '\0')
		return peer_dispatch_resume(p, &m);
	if (core.draining)
		return peer_fail(p, PROTO_E_SHUTDOWN, "sottod is stopping");
	if (session_count() >= core.cfg.max_sessions)
		return peer_fail(p, PROTO_E_BUSY, "all %d sessions are in use",
		    core.cfg.max_sessions);
	if ((s = session_open(p, &m, msg, &e)) == NULL)
		return peer_fail(p, e, "OPEN: %s", msg);
	ev = proto_event_opened(session_name(s), -1, 0);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
	p->state = PEER_STREAMING;
}

static void
peer_dispatch_subscribe(struct peer *p, const struct proto_frame *f)
{
	struct msg_subscribe m;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	if ((e = proto_parse_subscribe(f->payload, f->len, &m, msg)) !=
	    PROTO_OK)
		return peer_fail(p, e, "SUBSCRIBE: %s", msg);
	if (strcmp(m.source, "mic") != 0)
		return peer_fail(p, PROTO_E_BAD_VALUE, "unknown source '%s' "
		    "(sources: mic)", m.source);
	if (session_mic() == NULL || session_done(session_mic()))
		return peer_fail(p, PROTO_E_UNAVAILABLE, "the microphone is "
		    "not enabled (set enabled = yes in [mic])");
	session_subscribe(session_mic(), p, m.since, m.since_unit);
}

static void
peer_dispatch_audio(struct peer *p, const struct proto_frame *f)
{
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	session_audio(p->session, f->payload, f->len, msg, &e);
	if (e != PROTO_OK)
		peer_fail(p, e, "AUDIO: %s", msg);
}

static void
peer_dispatch_end(struct peer *p, const struct proto_frame *f)
{
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	if ((e = proto_parse_empty(f->payload, f->len, msg)) != PROTO_OK)
		return peer_fail(p, e, "END: %s", msg);
	p->state = PEER_ENDING;
	session_end(p->session);
}

static void
peer_dispatch_status(struct peer *p, const struct proto_frame *f)
{
	struct proto_status st;
	struct proto_session_info *list;
	struct core_stats cs;
	enum proto_error e;
	char msg[PROTO_MSG_MAX], *ev;

	if ((e = proto_parse_empty(f->payload, f->len, msg)) != PROTO_OK)
		return peer_fail(p, e, "STATUS: %s", msg);
	core_stats(&cs);
	memset(&st, 0, sizeof(st));
	st.sessions = cs.sessions + (cs.mic >= 0 &&
	    !session_done(session_mic()));
	if ((st.n_list = session_list(&list)) < 0)
		return peer_fail(p, PROTO_E_INTERNAL, "STATUS: out of memory");
	st.list = list;
	st.clients = cs.clients;
	st.subscribers = cs.subscribers;
	st.model = core.model_name;
	st.compute = core.model_compute;
	st.rtf = cs.rtf;
	st.lag_s = cs.max_lag_s;
	st.uptime_s = cs.uptime_s;
	st.mic = cs.mic;
	st.dropped_partials = cs.dropped_partials;
	st.overload_s = (uint64_t)cs.mic_overload_s;
	ev = proto_event_status(&st);
	free(list);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
}

/* Which frames each state accepts; the rest are bad_order. */
static int
peer_allowed(const struct peer *p, uint8_t type)
{
	switch (p->state) {
	case PEER_NEW:
		return type == MSG_HELLO;
	case PEER_READY:
		return type == MSG_OPEN || type == MSG_SUBSCRIBE ||
		    type == MSG_STATUS;
	case PEER_STREAMING:
		return type == MSG_AUDIO || type == MSG_END ||
		    type == MSG_STATUS;
	case PEER_ENDING:
	case PEER_SUBSCRIBED:
		return type == MSG_STATUS;
	}
	return 0;
}

/* One frame from the peer (its socket, or a front door's message). */
void
peer_dispatch(struct peer *p, const struct proto_frame *f)
{
	static const char *const states[] = { "before HELLO", "before OPEN",
	    "while streaming", "after END", "while subscribed" };

	if (f->type == MSG_EVENT)
		return peer_fail(p, PROTO_E_BAD_FRAME, "EVENT frames go from "
		    "the server to clients");
	if (!peer_allowed(p, f->type))
		return peer_fail(p, PROTO_E_BAD_ORDER, "%s %s",
		    proto_type_name(f->type), states[p->state]);
	switch (f->type) {
	case MSG_HELLO:
		peer_dispatch_hello(p, f);
		break;
	case MSG_OPEN:
		peer_dispatch_open(p, f);
		break;
	case MSG_SUBSCRIBE:
		peer_dispatch_subscribe(p, f);
		break;
	case MSG_AUDIO:
		peer_dispatch_audio(p, f);
		break;
	case MSG_END:
		peer_dispatch_end(p, f);
		break;
	case MSG_STATUS:
		peer_dispatch_status(p, f);
		break;
	}
}
