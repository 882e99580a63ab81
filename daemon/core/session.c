/*
 * Sessions: one audio stream each, its decoder (through worker.c), the
 * peers that receive its events, and the finals kept for a resume.
 *
 * A client session belongs to the peer that opened it (the owner, also
 * its one subscriber). A shared session (the microphone) has no owner and
 * any number of subscribers. Finals carry ids 0, 1, 2... per session; the
 * last SESSION_HISTORY_MAX are kept as sent, so a client that lost its
 * connection can OPEN {"session", "since"} within the grace period and
 * get the ones it missed. A session whose owner went away keeps decoding
 * what it has; one that ended is kept, for the same grace period, only
 * for its finals. A front door without resume (PEER_NO_RESUME: Wyoming)
 * gets no grace: its session is freed on the next loop turn after its
 * connection goes (after "end" when it was ending).
 *
 * Flow control: a client session whose lag (audio received but not yet
 * decoded) passes SESSION_LAG_HIGH_S stops reading its owner's socket
 * until the lag is back under SESSION_LAG_LOW_S, so a fast sender is
 * slowed down and nothing is dropped. A shared source cannot wait: past
 * SESSION_LAG_MAX_S its new audio is dropped, counted, and announced to
 * subscribers with an "overload" event.
 *
 * How a session is opened is in session-open.c; what happens to worker
 * results, and how a stream ends (END or a shutdown), in session-result.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core-private.h"
#include "log.h"
#include "peer.h"
#include "session-private.h"
#include "source-client.h"
#include "worker.h"

struct session_list sessions = TAILQ_HEAD_INITIALIZER(sessions);

const char *
session_name(const struct session *s)
{
	return s->name;
}

int
session_done(const struct session *s)
{
	return (s->flags & SESSION_DONE) != 0;
}

/* Shared, or a client session with its owner connected. */
int
session_in_use(const struct session *s)
{
	return s->owner != NULL || (s->flags & SESSION_SHARED);
}

int64_t
session_last_final(const struct session *s)
{
	return s->next_final - 1;
}

double
session_overload_s(const struct session *s)
{
	return s->overload_s;
}

struct session *
session_find(const char *name)
{
	struct session *s;

	TAILQ_FOREACH(s, &sessions, entry)
		if (strcmp(s->name, name) == 0)
			return s;
	return NULL;
}

struct session *
session_find_id(uint64_t id)
{
	struct session *s;

	TAILQ_FOREACH(s, &sessions, entry)
		if (s->id == id)
			return s;
	return NULL;
}

/*
 * Client sessions still streaming, and files being transcribed (the
 * max_sessions count).
 */
int
session_count(void)
{
	struct session *s;
	int n = worker_file_count();

	TAILQ_FOREACH(s, &sessions, entry)
		if (!(s->flags & (SESSION_SHARED | SESSION_DONE)))
			n++;
	return n;
}

/* Sessions and files still decoding: what a drain waits for. */
int
session_busy(void)
{
	struct session *s;
	int n = worker_file_count();

	TAILQ_FOREACH(s, &sessions, entry)
		if (!(s->flags & SESSION_DONE))
			n++;
	return n;
}

double
session_lag(const struct session *s)
{
	double lag = (double)s->received / SOTTO_SAMPLE_RATE - s->audio_time;

	return (s->flags & SESSION_DONE) || lag < 0 ? 0 : lag;
}

double
session_max_lag(void)
{
	struct session *s;
	double m = 0;

	TAILQ_FOREACH(s, &sessions, entry)
		if (session_lag(s) > m)
			m = session_lag(s);
	return m;
}

/* What a status event says a session is doing. */
static const char *
session_state(const struct session *s)
{
	if (s->flags & SESSION_SHARED)
		return "live";
	if (s->flags & SESSION_DONE)
		return "done";
	if (s->owner == NULL)
		return "waiting";
	return s->flags & SESSION_ENDING ? "ending" : "streaming";
}

int
session_list(struct proto_session_info **ret)
{
	struct proto_session_info *l, *e;
	struct worker_file **files;
	struct session *s;
	int n = worker_file_count(), i, j, k;

	TAILQ_FOREACH(s, &sessions, entry)
		n++;
	*ret = l = calloc(n ? n : 1, sizeof(*l));
	files = calloc(n ? n : 1, sizeof(*files));
	if (l == NULL || files == NULL) {
		free(l);
		free(files);
		*ret = NULL;
		return -1;
	}
	i = 0;
	TAILQ_FOREACH(s, &sessions, entry) {
		e = &l[i++];
		snprintf(e->id, sizeof(e->id), "%s", s->name);
		e->source = s->source != NULL ? s->source : "socket";
		e->state = session_state(s);
		e->audio_s = (double)s->received / SOTTO_SAMPLE_RATE;
		e->lag_s = session_lag(s);
		e->rtf = s->audio_time > 0 ? s->compute_s / s->audio_time : -1;
	}
	k = worker_file_list(files, n - i);
	for (j = 0; j < k; j++) {
		e = &l[i++];
		snprintf(e->id, sizeof(e->id), "file-%llu",
		    (unsigned long long)files[j]->id);
		e->source = "http";
		e->state = "transcribing";
		e->audio_s = e->lag_s = e->rtf = -1;
	}
	free(files);
	return i;
}

void
session_free(struct session *s)
{
	struct peer *p;
	int i;

	while ((p = TAILQ_FIRST(&s->subs)) != NULL) {
		TAILQ_REMOVE(&s->subs, p, sub_entry);
		p->session = NULL;
	}
	TAILQ_REMOVE(&sessions, s, entry);
	if (s->ws != NULL)
		worker_queue(s->ws, WORKER_FREE);
	if (s->expire != NULL)
		event_free(s->expire);
	source_client_free(s->src);
	for (i = 0; i < SESSION_HISTORY_MAX; i++) {
		free(s->hist[i]);
		free(s->unit_hist[i]);
	}
	free(s->unit_open);
	caption_free(&s->caption);
	free(s->last_partial);
	free(s->language_ev);
	log_debug("session %s freed", s->name);
	free(s);
	server_drain_check();
}

void
session_free_all(void)
{
	while (!TAILQ_EMPTY(&sessions))
		session_free(TAILQ_FIRST(&sessions));
}

static void
session_expire_cb(int fd, short ev, void *arg)
{
	struct session *s = arg;

	if (s->flags & SESSION_NO_RESUME)
		log_debug("session %s: not kept (its client cannot "
		    "resume)", s->name);
	else if (core.draining)
		log_info("session %s: %s: sottod is stopping", s->name,
		    s->flags & SESSION_DONE ? "finals no longer kept" :
		    "not resumed");
	else
		log_info("session %s: %s after %d s", s->name, s->flags &
		    SESSION_DONE ? "finals expired" : "no reconnect",
		    core.cfg.reconnect_grace_s);
	session_free(s);
}

/* Keep s for the grace period (restarting the clock). */
void
session_expire_arm(struct session *s)
{
	struct timeval tv = { core.cfg.reconnect_grace_s, 0 };

	if (s->flags & SESSION_SHARED)
		return;
	if ((core.draining && (s->flags & SESSION_DONE)) ||
	    (s->flags & SESSION_NO_RESUME)) {
		tv.tv_sec = 0;
	}
	if (s->expire == NULL)
		s->expire = evtimer_new(core.base, session_expire_cb, s);
	if (s->expire != NULL)
		evtimer_add(s->expire, &tv);
}

/* Send json to every subscriber. */
void
session_broadcast(struct session *s, enum peer_event kind, const char *json)
{
	struct peer *p, *next;

	if (json == NULL) {
		log_warnx("session %s: out of memory for an event", s->name);
		return;
	}
	TAILQ_FOREACH_SAFE(p, &s->subs, sub_entry, next)
		peer_send(p, kind, json);
}

/*
 * Send p the kept closed units after since_unit, then the open unit as
 * it stands (PROTO_SINCE_NONE: no units, as for a client that does not
 * ask for them).
 */
static void
session_replay_units(struct session *s, struct peer *p, int64_t since_unit)
{
	int64_t id = s->caption.next_id - SESSION_HISTORY_MAX;

	if (since_unit == PROTO_SINCE_NONE)
		return;
	if (id <= since_unit)
		id = since_unit + 1;
	if (id < 0)
		id = 0;
	for (; id < s->caption.next_id; id++)
		peer_send(p, PEER_EVENT_REPLAY,
		    s->unit_hist[id % SESSION_HISTORY_MAX]);
	if (s->unit_open != NULL)
		peer_send(p, PEER_EVENT_PARTIAL, s->unit_open);
}

/* Send p the kept finals after since. */
static void
session_replay(struct session *s, struct peer *p, int64_t since)
{
	int64_t id = s->next_final - SESSION_HISTORY_MAX;

	if (id <= since)
		id = since + 1;
	if (id < 0)
		id = 0;
	for (; id < s->next_final; id++)
		peer_send(p, PEER_EVENT_REPLAY,
		    s->hist[id % SESSION_HISTORY_MAX]);
}

/* Resume: p takes over s (which has no owner) from final since on. */
void
session_attach(struct session *s, struct peer *p, int64_t since,
    int64_t since_unit)
{
	char *ev;

	if (s->expire != NULL && !(s->flags & SESSION_DONE))
		evtimer_del(s->expire);
	s->owner = p;
	TAILQ_INSERT_TAIL(&s->subs, p, sub_entry);
	p->session = s;
	p->state = s->flags & SESSION_DONE ? PEER_READY : s->flags &
	    SESSION_ENDING ? PEER_ENDING : PEER_STREAMING;
	ev = proto_event_opened(s->name, session_last_final(s),
	    s->audio_frames);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
	if (s->language_ev != NULL)
		peer_send(p, PEER_EVENT_CONTROL, s->language_ev);
	session_replay(s, p, since);
	session_replay_units(s, p, since_unit);
	if (s->flags & SESSION_DONE) {
		ev = session_end_event(s);
		peer_send(p, PEER_EVENT_CONTROL, ev);
		free(ev);
		peer_session_ended(p);
	}
	log_info("session %s: resumed after final %lld", s->name,
	    (long long)since);
}

void
session_subscribe(struct session *s, struct peer *p, int64_t since,
    int64_t since_unit)
{
	char *ev;

	TAILQ_INSERT_TAIL(&s->subs, p, sub_entry);
	p->session = s;
	p->state = PEER_SUBSCRIBED;
	ev = proto_event_subscribed(s->name, s->name);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
	if (s->language_ev != NULL)
		peer_send(p, PEER_EVENT_CONTROL, s->language_ev);
	if (since != PROTO_SINCE_NONE)
		session_replay(s, p, since);
	session_replay_units(s, p, since_unit);
}

/* p goes away (closed or failed); an owned session waits for a resume. */
void
session_detach(struct session *s, struct peer *p)
{
	TAILQ_REMOVE(&s->subs, p, sub_entry);
	p->session = NULL;
	if (s->owner != p)
		return;
	s->owner = NULL;
	if (p->flags & PEER_NO_RESUME)
		s->flags |= SESSION_NO_RESUME;
	if (core.draining && !(s->flags & SESSION_DONE)) {
		session_free(s);
		return;
	}
	if (!(s->flags & SESSION_ENDING) || (s->flags & SESSION_DONE))
		session_expire_arm(s);
}

void
session_flow(struct session *s)
{
	double lag = session_lag(s);

	if (s->owner == NULL)
		return;
	if (lag > SESSION_LAG_HIGH_S && !(s->owner->flags & PEER_PAUSED))
		peer_pause(s->owner, 1);
	else if (lag < SESSION_LAG_LOW_S && (s->owner->flags & PEER_PAUSED))
		peer_pause(s->owner, 0);
}

int
session_push(struct session *s, const float *pcm, size_t n)
{
	if (n > 0 && worker_stream_push(s->ws, pcm, n) != 0)
		return -1;
	s->received += n;
	core_totals.audio_in_s += (double)n / SOTTO_SAMPLE_RATE;
	return 0;
}

void
session_audio(struct session *s, const uint8_t *p, size_t len, char *msg,
    enum proto_error *ret_error)
{
	const float *pcm;
	size_t n;

	*ret_error = source_client_decode(s->src, p, len, &pcm, &n, msg);
	if (*ret_error != PROTO_OK)
		return;
	s->audio_frames++;
	if (session_push(s, pcm, n) != 0) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		*ret_error = PROTO_E_INTERNAL;
		return;
	}
	session_kick(s);
	session_flow(s);
}

/* Microphone frames; dropped (and announced) while the engine lags. */
void
session_shared_audio(struct session *s, const int16_t *pcm, size_t frames)
{
	enum proto_error e;
	char msg[PROTO_MSG_MAX], *ev;
	double secs = (double)frames / core.cfg.mic_rate;

	if (s->flags & (SESSION_ENDING | SESSION_DONE))
		return;
	if (session_lag(s) > SESSION_LAG_MAX_S) {
		s->dropping_s += secs;
		s->overload_s += secs;
		core_totals.overload_s += secs;
		return;
	}
	if (s->dropping_s > 0) {
		log_warnx("session %s: engine behind, %.1f s of audio skipped",
		    s->name, s->dropping_s);
		ev = proto_event_overload(s->name, s->dropping_s,
		    s->overload_s);
		session_broadcast(s, PEER_EVENT_CONTROL, ev);
		free(ev);
		s->dropping_s = 0;
	}
	session_audio(s, (const uint8_t *)pcm, frames * sizeof(*pcm) *
	    core.cfg.mic_channels, msg, &e);
	if (e != PROTO_OK)
		log_warnx("session %s: %s", s->name, msg);
}

