/*
 * A session's results and its end: each worker result becomes final and
 * partial events for the session's peers and the next job is queued
 * (session_kick); END, or a shutdown, finishes the stream one step per
 * job, then "end" goes out with what was received and what, if anything,
 * was never decoded.
 *
 * Shutdown (server.c): session_drain_all ends every stream that has
 * someone to tell; if the grace runs out, session_abort_all ends them at
 * once, each "end" saying how many seconds of its audio were not
 * transcribed (undecoded_s: audio received past the point where every
 * word is final), so that no loss is silent.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core-private.h"
#include "log.h"
#include "peer.h"
#include "session-private.h"
#include "source-client.h"
#include "worker.h"

/* The "end" event of s (malloc'd; NULL when out of memory). */
char *
session_end_event(const struct session *s)
{
	struct proto_end e;

	e.last_final = session_last_final(s);
	e.last_final_end = s->final_end;
	e.audio_s = (double)s->received / SOTTO_SAMPLE_RATE;
	e.undecoded_s = s->undecoded_s;
	return proto_event_end(s->name, &e);
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

/*
 * What job s wants now, if any: a step when one is due; else, when the
 * compute thread has time, an early step or preview (worker_stream_early).
 * A session whose client waits for the answer (session_answer_first)
 * holds a due step while a pause begins: if the speaker stopped, one
 * step at the end of the pause then reads all of it, where a step begun
 * in it would make the end step wait for it, and its answer after both.
 */
static int
session_next(struct session *s, enum worker_early *early)
{
	int due = s->due || worker_stream_pending(s->ws) >= s->step_samples;
	size_t soon = 0;

	/*
	 * Previews where the engine has the time: its last step took half
	 * of idle_step_ms or less, so a preview delays a step that falls due
	 * by little. Slower (tiny.en on two AVX2 cores, 0.45-0.6 s a step),
	 * they made the partials later, not sooner, and the finals later
	 * (docs/benchmarks.md, "idle steps"). The session's own last step,
	 * not the compute thread's moving average, which a fresh daemon's
	 * first, cold step holds high for many steps.
	 */
	if (!due && s->idle_step_samples > 0 && s->last_step_s > 0 &&
	    s->last_step_s * 2 * SOTTO_SAMPLE_RATE <=
	    (double)s->idle_step_samples && worker_idle_alone())
		soon = s->idle_step_samples;

	*early = worker_stream_early(s->ws, soon);
	if (due && !s->due && s->answer_first) {
		if (*early == WORKER_EARLY_PAUSING)
			return 0;
		if (*early == WORKER_EARLY_END)
			return 1;
	}
	if (due) {
		*early = WORKER_EARLY_NO;
		return 1;
	}
	if (*early == WORKER_EARLY_PAUSING || worker_queue_depth() > 0)
		*early = WORKER_EARLY_NO;
	return *early != WORKER_EARLY_NO;
}

/* Queue the next job if one is due and none is running. */
void
session_kick(struct session *s)
{
	enum worker_early early;
	int rc;

	if (s->in_flight || (s->flags & (SESSION_DONE | SESSION_ABORTED)))
		return;
	if (s->flags & SESSION_ENDING) {
		if (worker_queue(s->ws, WORKER_FINISH) == 0)
			s->in_flight = 1;
		return;
	}
	if (!session_next(s, &early))
		return;
	rc = early == WORKER_EARLY_NO ? worker_queue(s->ws, WORKER_STEP) :
	    worker_queue_early_step(s->ws, early);
	if (rc == 0)
		s->in_flight = 1;
}

/* The words of a final as the protocol writes them (NULL: none). */
static struct proto_word *
final_words(const struct worker_segment *f)
{
	struct proto_word *w;
	int i;

	if (f->words == NULL ||
	    (w = calloc(f->n_words + 1, sizeof(*w))) == NULL)
		return NULL;
	for (i = 0; i < f->n_words; i++) {
		w[i].start = f->words[i].start;
		w[i].end = f->words[i].end;
		w[i].word = f->words[i].word;
		w[i].probability = f->words[i].probability;
	}
	return w;
}

/*
 * The caption builder's output (caption.h): a closed unit goes to every
 * peer as a final would (never dropped) and is kept for a resume; the
 * open unit as a partial (the next one replaces it).
 */
void
session_unit(void *arg, const struct caption_unit *u)
{
	struct session *s = arg;
	struct proto_unit pu;
	char *ev;

	pu.id = u->id;
	pu.start = u->start;
	pu.end = u->end;
	pu.text = u->text;
	pu.tentative = u->tentative;
	pu.closed = u->closed;
	pu.first_final = u->first_final;
	pu.last_final = u->last_final;
	pu.speaker = u->speaker;
	if ((ev = proto_event_unit(s->name, &pu)) == NULL) {
		log_warnx("session %s: out of memory", s->name);
		return;
	}
	if (u->closed) {
		free(s->unit_hist[u->id % SESSION_HISTORY_MAX]);
		s->unit_hist[u->id % SESSION_HISTORY_MAX] = ev;
		free(s->unit_open);
		s->unit_open = NULL;
		session_broadcast(s, PEER_EVENT_FINAL, ev);
		return;
	}
	free(s->unit_open);
	s->unit_open = ev;
	session_broadcast(s, PEER_EVENT_PARTIAL, ev);
}

static void
session_finals(struct session *s, const struct worker_result *r)
{
	struct proto_segment segs[64];
	struct proto_word *words[64];
	int i, k, n;
	char *ev;

	for (i = 0; i < r->n_finals; i += n) {
		for (n = 0; n < 64 && i + n < r->n_finals; n++) {
			segs[n].start = r->finals[i + n].start;
			segs[n].end = r->finals[i + n].end;
			segs[n].text = r->finals[i + n].text;
			segs[n].speaker = r->finals[i + n].speaker;
			segs[n].words = words[n] = final_words(&r->finals[i +
			    n]);
			segs[n].n_words = words[n] != NULL ?
			    r->finals[i + n].n_words : 0;
		}
		ev = proto_event_final(s->name, s->next_final, segs, n,
		    session_lag(s));
		for (k = 0; k < n; k++)
			free(words[k]);
		if (ev == NULL) {
			log_warnx("session %s: out of memory", s->name);
			continue;
		}
		free(s->hist[s->next_final % SESSION_HISTORY_MAX]);
		s->hist[s->next_final % SESSION_HISTORY_MAX] = ev;
		if (segs[n - 1].end > s->final_end)
			s->final_end = segs[n - 1].end;
		session_broadcast(s, PEER_EVENT_FINAL, ev);
		/* after the final: the units it closes come from it */
		for (k = 0; k < n; k++) {
			caption_speaker(&s->caption, segs[k].speaker);
			caption_final(&s->caption, s->next_final,
			    segs[k].start, segs[k].end, segs[k].text);
		}
		s->next_final++;
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
	    r->partial_end, session_lag(s));
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
	struct peer *p = s->owner;

	/* a door's next session goes on with its labels: none of the
	   stream's jobs is queued or running now */
	if (s->ws != NULL && p != NULL && (p->flags & PEER_KEEP_SPEAKERS) &&
	    p->track == NULL)
		p->track = worker_stream_track_take(s->ws, &p->track_t0);
	if (s->ws != NULL && worker_queue(s->ws, WORKER_FREE) == 0)
		s->ws = NULL;
}

/* The stream is over: "end" to everyone, then keep finals a while. */
static void
session_done_now(struct session *s)
{
	struct peer *p, *next;
	double done;
	char *ev;

	s->flags |= SESSION_DONE;
	session_release_engine(s);
	caption_flush(&s->caption);	/* its last unit, before "end" */
	if (!(s->flags & SESSION_FINISHED)) {
		s->undecoded_s = (double)s->received / SOTTO_SAMPLE_RATE -
		    s->decoded_s;
		if (s->undecoded_s < 0)
			s->undecoded_s = 0;
	}
	done = (double)s->received / SOTTO_SAMPLE_RATE - s->undecoded_s;
	if (done > s->audio_time)
		core_totals.audio_done_s += done - s->audio_time;
	ev = session_end_event(s);
	session_broadcast(s, PEER_EVENT_CONTROL, ev);
	free(ev);
	if (s->undecoded_s > 0)
		log_warnx("session %s: ended at shutdown, %.1f s of %.1f s of "
		    "audio not transcribed", s->name, s->undecoded_s,
		    (double)s->received / SOTTO_SAMPLE_RATE);
	else
		log_info("session %s: ended, %lld finals", s->name,
		    (long long)s->next_final);
	TAILQ_FOREACH_SAFE(p, &s->subs, sub_entry, next)
		peer_session_ended(p);
	if (!(s->flags & SESSION_SHARED))
		session_expire_arm(s);
	server_drain_check();	/* the microphone's end too */
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

/*
 * The detected language, when it first comes, changes, or settles (then
 * it stays); kept for a resume or a new subscriber.
 */
static void
session_language(struct session *s, const struct worker_result *r)
{
	if (r->language[0] == '\0' || s->language_settled ||
	    (strcmp(r->language, s->language) == 0 && !r->language_settled))
		return;
	snprintf(s->language, sizeof(s->language), "%s", r->language);
	s->language_settled = r->language_settled;
	free(s->language_ev);
	s->language_ev = proto_event_language(s->name, r->language,
	    r->language_prob, r->language_settled);
	session_broadcast(s, PEER_EVENT_CONTROL, s->language_ev);
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
	if (r->stepped) {
		s->compute_s += r->compute_s;
		s->last_step_s = r->compute_s;
		core_count_step(r->compute_s);
		if (r->audio_time > s->audio_time) {
			core_totals.audio_done_s += r->audio_time -
			    s->audio_time;
			s->audio_time = r->audio_time;
		}
		s->decoded_s = r->partial != NULL && r->partial[0] != '\0' ?
		    r->partial_start : r->audio_time;
	}
	s->due = r->due;
	session_language(s, r);
	session_finals(s, r);
	if (r->ended)
		s->flags |= SESSION_FINISHED;
	if (r->ended || r->aborted || (s->flags & SESSION_ABORTED)) {
		session_done_now(s);
		return;
	}
	if (r->stepped) {
		session_partial(s, r);
		caption_partial(&s->caption, r->partial ? r->partial : "",
		    r->partial_start, r->audio_time);
	}
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

/*
 * Shutdown grace over (or a second signal): the worker stops (worker_abort)
 * and every stream ends now, its "end" saying how much of its audio was
 * never decoded; one with a job running ends when that job returns.
 */
void
session_abort_all(void)
{
	struct session *s, *next;

	TAILQ_FOREACH_SAFE(s, &sessions, entry, next) {
		if (s->flags & SESSION_DONE)
			continue;
		s->flags |= SESSION_ABORTED;
		if (!s->in_flight)
			session_done_now(s);
	}
}
