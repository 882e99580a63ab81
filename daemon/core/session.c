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
 * What happens to worker results, and how a stream ends (END or a
 * shutdown), is in session-result.c.
 */
#include <sys/random.h>

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
static uint64_t session_next_id = 1;

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

static struct session *
session_new(const char *name, const struct sotto_stream_params *sp,
    enum proto_format format, int rate, int channels, int live, char *msg)
{
	struct sotto_stream_params p = *sp;
	struct session *s;

	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		return NULL;
	}
	p.vad = vad_for(live);
	caption_init(&s->caption, session_unit, s);
	TAILQ_INIT(&s->subs);
	s->id = session_next_id++;
	snprintf(s->name, sizeof(s->name), "%s", name);
	s->step_samples = (size_t)sp->step_ms * SOTTO_SAMPLE_RATE / 1000;
	if ((s->src = source_client_new(format, rate, channels, msg)) == NULL ||
	    (s->ws = worker_stream_new(s->id, &p, live)) == NULL) {
		if (s->src != NULL)
			snprintf(msg, PROTO_MSG_MAX, "out of memory");
		source_client_free(s->src);
		free(s);
		return NULL;
	}
	TAILQ_INSERT_TAIL(&sessions, s, entry);
	core_totals.sessions++;
	return s;
}

/* Check language and task against the model; fill sp. */
static int
session_params(const char *language, enum proto_task task,
    struct sotto_stream_params *sp, char *msg)
{
	const char *code;
	int i, n;

	sotto_stream_params_init(sp);
	sp->step_ms = core.cfg.step_ms;
	sp->beam_size = core.cfg.beam_size;
	sp->task = task == PROTO_TASK_TRANSLATE ? SOTTO_TASK_TRANSLATE :
	    SOTTO_TASK_TRANSCRIBE;
	if (*language == '\0')
		language = core.cfg.language;
	if (!core.multilingual) {
		if (strcmp(language, "en") != 0 && strcmp(language, "auto"))
			goto english;
		if (task == PROTO_TASK_TRANSLATE)
			goto english;
		sp->language = "en";
		return 0;
	}
	if (strcmp(language, "auto") == 0)
		return 0;
	n = sotto_language_count(core.model);
	for (i = 0; i < n; i++)
		if ((code = sotto_language_code(core.model, i)) != NULL &&
		    strcmp(code, language) == 0) {
			sp->language = code;
			return 0;
		}
	snprintf(msg, PROTO_MSG_MAX, "unknown language '%s'", language);
	return -1;
english:
	snprintf(msg, PROTO_MSG_MAX, "model %s is English-only: language "
	    "must be en and task transcribe", core.model_name);
	return -1;
}

int
session_check_language(const char *language, char *msg)
{
	struct sotto_stream_params sp;

	return session_params(language, PROTO_TASK_TRANSCRIBE, &sp, msg);
}

/*
 * A new client session for p, or NULL with msg (and the error is then
 * PROTO_E_BUSY when over max_sessions, else PROTO_E_BAD_VALUE).
 */
struct session *
session_open(struct peer *p, const struct msg_open *m, char *msg)
{
	struct sotto_stream_params sp;
	struct session *s;
	uint64_t r = 0;
	char name[PROTO_SESSION_MAX];

	if (session_params(m->language, m->task, &sp, msg) != 0)
		return NULL;
	sp.word_timestamps = m->word_timestamps;
	sp.prompt = m->prompt;
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r ^= (uint64_t)(core_now() * 1e9) ^ session_next_id << 48;
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)r);
	if ((s = session_new(name, &sp, m->format, m->rate, m->channels,
	    m->live, msg)) == NULL)
		return NULL;
	s->owner = p;
	s->source = p->ops->name;
	core_count_session(s->source);
	TAILQ_INSERT_TAIL(&s->subs, p, sub_entry);
	p->session = s;
	log_info("session %s: opened (%s %d Hz x%d, language %s%s)",
	    s->name, proto_format_name(m->format), m->rate, m->channels,
	    sp.language ? sp.language : "auto", m->live ? ", live" : "");
	return s;
}

struct session *
session_shared_new(const char *name, int rate, int channels,
    const char *language)
{
	struct sotto_stream_params sp;
	struct session *s;
	char msg[PROTO_MSG_MAX];

	if (session_params(language, PROTO_TASK_TRANSCRIBE, &sp, msg) != 0 ||
	    (s = session_new(name, &sp, PROTO_FORMAT_S16LE, rate, channels, 1,
	    msg)) == NULL) {
		log_warnx("session %s: %s", name, msg);
		return NULL;
	}
	s->flags |= SESSION_SHARED;
	s->source = "mic";
	core_count_session(s->source);
	worker_stream_follow(s->ws);	/* it never ends: moves on a reload */
	return s;
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

