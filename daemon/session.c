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
 */
#include <sys/random.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "sottod.h"

#define SESSION_LAG_HIGH_S	8.0
#define SESSION_LAG_LOW_S	4.0
#define SESSION_LAG_MAX_S	30.0

struct session {
	uint64_t		 id;
	char			 name[PROTO_SESSION_MAX];
	int			 flags;
#define SESSION_SHARED	0x1	/* no owner; subscribers */
#define SESSION_ENDING	0x2	/* finish once the worker is idle */
#define SESSION_DONE	0x4	/* finished or failed: finals only */
#define SESSION_NO_RESUME 0x8	/* its owner cannot resume: no grace */
	struct peer		*owner;
	struct peer_list	 subs;
	struct source_client	*src;
	struct worker_stream	*ws;
	int			 in_flight, due;
	size_t			 step_samples;
	uint64_t		 received;	/* 16 kHz samples */
	double			 audio_time;	/* what the engine holds */
	char			*last_partial;
	char			*hist[SESSION_HISTORY_MAX];
	int64_t			 next_final;
	double			 overload_s, dropping_s;
	struct event		*expire;
	TAILQ_ENTRY(session)	 entry;
};

struct session_list sessions = TAILQ_HEAD_INITIALIZER(sessions);
struct sottod_stats sottod_stats;
static uint64_t session_next_id = 1;

static void	session_kick(struct session *);

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

static struct session *
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

static double
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

static void
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
	for (i = 0; i < SESSION_HISTORY_MAX; i++)
		free(s->hist[i]);
	free(s->last_partial);
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
	else
		log_info("session %s: %s after %d s", s->name, s->flags &
		    SESSION_DONE ? "finals expired" : "no reconnect",
		    sottod.cfg.reconnect_grace_s);
	session_free(s);
}

/* Keep s for the grace period (restarting the clock). */
static void
session_expire_arm(struct session *s)
{
	struct timeval tv = { sottod.cfg.reconnect_grace_s, 0 };

	if (s->flags & SESSION_SHARED)
		return;
	if ((sottod.draining && (s->flags & SESSION_DONE)) ||
	    (s->flags & SESSION_NO_RESUME)) {
		tv.tv_sec = 0;
	}
	if (s->expire == NULL)
		s->expire = evtimer_new(sottod.base, session_expire_cb, s);
	if (s->expire != NULL)
		evtimer_add(s->expire, &tv);
}

/* Send json to every subscriber. */
static void
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
	sottod_stats.sessions++;
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
	sp->step_ms = sottod.cfg.step_ms;
	sp->beam_size = sottod.cfg.beam_size;
	sp->task = task == PROTO_TASK_TRANSLATE ? SOTTO_TASK_TRANSLATE :
	    SOTTO_TASK_TRANSCRIBE;
	if (*language == '\0')
		language = sottod.cfg.language;
	if (!sottod.multilingual) {
		if (strcmp(language, "en") != 0 && strcmp(language, "auto"))
			goto english;
		if (task == PROTO_TASK_TRANSLATE)
			goto english;
		sp->language = "en";
		return 0;
	}
	if (strcmp(language, "auto") == 0)
		return 0;
	n = sotto_language_count(sottod.model);
	for (i = 0; i < n; i++)
		if ((code = sotto_language_code(sottod.model, i)) != NULL &&
		    strcmp(code, language) == 0) {
			sp->language = code;
			return 0;
		}
	snprintf(msg, PROTO_MSG_MAX, "unknown language '%s'", language);
	return -1;
english:
	snprintf(msg, PROTO_MSG_MAX, "model %s is English-only: language "
	    "must be en and task transcribe", sottod.model_name);
	return -1;
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
	if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
		r ^= (uint64_t)(sottod_now() * 1e9) ^ session_next_id << 48;
	snprintf(name, sizeof(name), "%016llx", (unsigned long long)r);
	if ((s = session_new(name, &sp, m->format, m->rate, m->channels,
	    m->live, msg)) == NULL)
		return NULL;
	s->owner = p;
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
	worker_stream_follow(s->ws);	/* it never ends: moves on a reload */
	return s;
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
session_attach(struct session *s, struct peer *p, int64_t since)
{
	char *ev;

	if (s->expire != NULL && !(s->flags & SESSION_DONE))
		evtimer_del(s->expire);
	s->owner = p;
	TAILQ_INSERT_TAIL(&s->subs, p, sub_entry);
	p->session = s;
	p->state = s->flags & SESSION_DONE ? PEER_READY : s->flags &
	    SESSION_ENDING ? PEER_ENDING : PEER_STREAMING;
	ev = proto_event_opened(s->name, session_last_final(s));
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
	session_replay(s, p, since);
	if (s->flags & SESSION_DONE) {
		ev = proto_event_end(s->name, session_last_final(s));
		peer_send(p, PEER_EVENT_CONTROL, ev);
		free(ev);
		peer_session_ended(p);
	}
	log_info("session %s: resumed after final %lld", s->name,
	    (long long)since);
}

void
session_subscribe(struct session *s, struct peer *p, int64_t since)
{
	char *ev;

	TAILQ_INSERT_TAIL(&s->subs, p, sub_entry);
	p->session = s;
	p->state = PEER_SUBSCRIBED;
	ev = proto_event_subscribed(s->name, s->name);
	peer_send(p, PEER_EVENT_CONTROL, ev);
	free(ev);
	if (since != PROTO_SINCE_NONE)
		session_replay(s, p, since);
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
	if (sottod.draining && !(s->flags & SESSION_DONE)) {
		session_free(s);
		return;
	}
	if (!(s->flags & SESSION_ENDING) || (s->flags & SESSION_DONE))
		session_expire_arm(s);
}

static void
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

static int
session_push(struct session *s, const float *pcm, size_t n)
{
	if (n > 0 && worker_stream_push(s->ws, pcm, n) != 0)
		return -1;
	s->received += n;
	sottod_stats.audio_in_s += (double)n / SOTTO_SAMPLE_RATE;
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
	double secs = (double)frames / sottod.cfg.mic_rate;

	if (s->flags & (SESSION_ENDING | SESSION_DONE))
		return;
	if (session_lag(s) > SESSION_LAG_MAX_S) {
		s->dropping_s += secs;
		s->overload_s += secs;
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
	    sottod.cfg.mic_channels, msg, &e);
	if (e != PROTO_OK)
		log_warnx("session %s: %s", s->name, msg);
}

/* End of stream: decode the rest, send the last finals and "end". */
void
session_end(struct session *s)
{
	const float *pcm;
	size_t n;
	char msg[PROTO_MSG_MAX];

	if (s->flags & (SESSION_ENDING | SESSION_DONE))
		return;
	if (source_client_flush(s->src, &pcm, &n, msg) != PROTO_OK ||
	    session_push(s, pcm, n) != 0)
		log_warnx("session %s: resampler tail lost: %s", s->name, msg);
	s->flags |= SESSION_ENDING;
	session_kick(s);
}

/* Queue the next job if one is due and none is running. */
static void
session_kick(struct session *s)
{
	if (s->in_flight || (s->flags & SESSION_DONE))
		return;
	if (s->flags & SESSION_ENDING) {
		if (worker_queue(s->ws, WORKER_FINISH) == 0)
			s->in_flight = 1;
		return;
	}
	if (s->due || worker_stream_pending(s->ws) >= s->step_samples)
		if (worker_queue(s->ws, WORKER_STEP) == 0)
			s->in_flight = 1;
}

static void
session_finals(struct session *s, const struct worker_result *r)
{
	struct proto_segment segs[64];
	int i, n;
	char *ev;

	for (i = 0; i < r->n_finals; i += n) {
		for (n = 0; n < 64 && i + n < r->n_finals; n++) {
			segs[n].start = r->finals[i + n].start;
			segs[n].end = r->finals[i + n].end;
			segs[n].text = r->finals[i + n].text;
		}
		if ((ev = proto_event_final(s->name, s->next_final, segs,
		    n)) == NULL) {
			log_warnx("session %s: out of memory", s->name);
			continue;
		}
		free(s->hist[s->next_final % SESSION_HISTORY_MAX]);
		s->hist[s->next_final % SESSION_HISTORY_MAX] = ev;
		s->next_final++;
		session_broadcast(s, PEER_EVENT_FINAL, ev);
	}
}

static void
session_partial(struct session *s, const struct worker_result *r)
{
	const char *text = r->partial ? r->partial : "";
	char *ev;

	if (strcmp(text, s->last_partial ? s->last_partial : "") == 0)
		return;
	free(s->last_partial);
	s->last_partial = strdup(text);
	ev = proto_event_partial(s->name, text, r->partial_start,
	    r->partial_end);
	session_broadcast(s, PEER_EVENT_PARTIAL, ev);
	free(ev);
}

/*
 * A done session keeps only its finals: its engine stream (tens of MB)
 * goes now, not when the session expires.
 */
static void
session_release_engine(struct session *s)
{
	if (s->ws != NULL && worker_queue(s->ws, WORKER_FREE) == 0)
		s->ws = NULL;
}

/* The stream is over: "end" to everyone, then keep finals a while. */
static void
session_done_now(struct session *s)
{
	struct peer *p, *next;
	char *ev;

	s->flags |= SESSION_DONE;
	if ((double)s->received / SOTTO_SAMPLE_RATE > s->audio_time)
		sottod_stats.audio_done_s += (double)s->received /
		    SOTTO_SAMPLE_RATE - s->audio_time;
	session_release_engine(s);
	ev = proto_event_end(s->name, session_last_final(s));
	session_broadcast(s, PEER_EVENT_CONTROL, ev);
	free(ev);
	log_info("session %s: ended, %lld finals", s->name,
	    (long long)s->next_final);
	TAILQ_FOREACH_SAFE(p, &s->subs, sub_entry, next)
		peer_session_ended(p);
	if (!(s->flags & SESSION_SHARED))
		session_expire_arm(s);
	/* A drain may have waited only for this one (the microphone). */
	server_drain_check();
}

static void
session_failed(struct session *s, const struct worker_result *r)
{
	struct peer *p, *next;

	log_warnx("session %s: engine: %s", s->name, r->err);
	s->flags |= SESSION_DONE;
	session_release_engine(s);
	TAILQ_FOREACH_SAFE(p, &s->subs, sub_entry, next)
		peer_fail(p, PROTO_E_INTERNAL, "engine: %s", r->err);
	if (!(s->flags & SESSION_SHARED))
		session_expire_arm(s);
	server_drain_check();
}

/* A job of the worker is done (loop thread). */
void
session_result(struct worker_result *r)
{
	struct session *s;

	if ((s = session_find_id(r->id)) == NULL)
		return;
	s->in_flight = 0;
	if (r->error) {
		session_failed(s, r);
		return;
	}
	if (r->stepped && r->audio_time > s->audio_time) {
		sottod_stats.audio_done_s += r->audio_time - s->audio_time;
		s->audio_time = r->audio_time;
	}
	s->due = r->due;
	session_finals(s, r);
	if (r->kind == WORKER_FINISH) {
		session_done_now(s);
		return;
	}
	if (r->stepped)
		session_partial(s, r);
	session_kick(s);
	session_flow(s);
}

/* SIGTERM: finish every stream that has someone to tell. */
void
session_drain_all(void)
{
	struct session *s, *next;

	TAILQ_FOREACH_SAFE(s, &sessions, entry, next) {
		if (s->flags & SESSION_DONE)
			session_free(s);
		else if (s->owner == NULL && !(s->flags & SESSION_SHARED))
			session_free(s);
		else
			session_end(s);
	}
}
