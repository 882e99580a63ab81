/*
 * sotto stream --resume: the AUDIO frames sent, kept (the last
 * STREAM_KEEP_BYTES of them) so that a resumed session gets again what
 * it did not take, the reconnection with backoff, and what a resume
 * does: the same session after its last final, or a new one from the
 * end of that final when sottod lost it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "client.h"
#include "proto.h"
#include "stream-run.h"

#define STREAM_KEEP_BYTES	(16u << 20)
#define RESUME_FIRST_MS		100
#define RESUME_MAX_MS		2000

int
stream_sent_add(struct stream_sent *s, const void *p, size_t len,
    double seconds)
{
	struct stream_frame *f;
	size_t cap;

	if (s->n == s->cap) {
		cap = s->cap ? 2 * s->cap : 1024;
		if ((f = realloc(s->f, cap * sizeof(*f))) == NULL)
			return -1;
		s->f = f;
		s->cap = cap;
	}
	f = &s->f[s->n];
	if ((f->data = malloc(len ? len : 1)) == NULL)
		return -1;
	memcpy(f->data, p, len);
	f->len = len;
	f->t = s->seconds;
	f->seconds = seconds;
	s->seconds += seconds;
	s->bytes += len;
	s->n++;
	while (s->bytes > STREAM_KEEP_BYTES && s->first < s->n) {
		s->bytes -= s->f[s->first].len;
		free(s->f[s->first].data);
		s->f[s->first++].data = NULL;
	}
	return 0;
}

void
stream_sent_free(struct stream_sent *s)
{
	size_t i;

	for (i = s->first; i < s->n; i++)
		free(s->f[i].data);
	free(s->f);
	memset(s, 0, sizeof(*s));
}

double
stream_sent_resend(const struct stream_sent *s, struct conn *c, size_t from)
{
	double lost = 0;
	size_t i;

	for (i = from; i < s->n; i++) {
		if (s->f[i].data == NULL)
			lost += s->f[i].seconds;
		else
			conn_queue(c, MSG_AUDIO, s->f[i].data, s->f[i].len);
	}
	return lost;
}

size_t
stream_sent_at(const struct stream_sent *s, double t)
{
	size_t i = s->n;

	while (i > 0 && s->f[i - 1].t + s->f[i - 1].seconds > t + 1e-9)
		i--;
	return i;
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

int
stream_reconnect(struct conn *c, const char *path, const char *session,
    int64_t since, int64_t since_unit, int max_s, char *err, size_t errlen)
{
	char json[200];
	int delay = RESUME_FIRST_MS, waited = 0, n;

	conn_close(c);
	for (;;) {
		if (conn_open(c, path, err, errlen) == 0)
			break;
		if (waited >= max_s * 1000)
			return -1;
		sleep_ms(delay);
		waited += delay;
		delay = delay * 2 > RESUME_MAX_MS ? RESUME_MAX_MS : delay * 2;
	}
	if (session == NULL)
		return 0;
	n = snprintf(json, sizeof(json), "{\"session\":\"%s\",\"since\":%lld,"
	    "\"since_unit\":%lld}", session, (long long)since,
	    (long long)since_unit);
	return conn_queue(c, MSG_OPEN, json, (size_t)n);
}

/* The last final's id and end, where a resume goes on from. */
void
stream_note_final(struct stream_run *r, struct json_object *ev)
{
	struct json_object *v, *segs;
	size_t n;

	if (json_object_object_get_ex(ev, "id", &v))
		r->last_final = json_object_get_int64(v);
	if (json_object_object_get_ex(ev, "segments", &segs) &&
	    json_object_is_type(segs, json_type_array) &&
	    (n = json_object_array_length(segs)) > 0 &&
	    json_object_object_get_ex(json_object_array_get_idx(segs, n - 1),
	    "end", &v))
		r->last_final_end = json_object_get_double(v);
}

/* Frames from..n again, END after them if it was sent. */
static void
stream_resend(struct stream_run *r, size_t from)
{
	double lost = stream_sent_resend(&r->frames, &r->c, from);

	if (r->end_sent)
		conn_queue(&r->c, MSG_END, NULL, 0);
	if (lost > 0)
		fprintf(stderr, "sotto stream: %.1f s of audio to send again "
		    "were no longer kept: lost\n", lost);
}

/* The session resumed: send again what it did not take. */
static void
stream_resumed(struct stream_run *r, struct json_object *ev)
{
	struct json_object *v;
	size_t took = 0;

	if (json_object_object_get_ex(ev, "audio_frames", &v))
		took = (size_t)json_object_get_int64(v);
	if (r->frame0 + took > r->frames.n)
		took = r->frames.n - r->frame0;
	fprintf(stderr, "sotto stream: resumed session %s after final %lld; "
	    "sending again the %zu frames (%.1f s) it had not taken\n",
	    r->out.session, (long long)r->last_final,
	    r->frames.n - r->frame0 - took, r->frames.seconds - (r->frame0 +
	    took < r->frames.n ? r->frames.f[r->frame0 + took].t :
	    r->frames.seconds));
	stream_resend(r, r->frame0 + took);
	r->resuming = 0;
}

/*
 * The session is gone (sottod restarted, or the grace period passed): a
 * new session from the end of the last final.
 */
static int
stream_new_session(struct stream_run *r, const struct stream_opts *o)
{
	double t0 = r->frame0 < r->frames.n ? r->frames.f[r->frame0].t :
	    r->frames.seconds;
	double from_t = t0 + (r->last_final >= 0 ? r->last_final_end : 0);
	size_t from = stream_sent_at(&r->frames, from_t);

	if (r->out.session[0] != '\0')
		fprintf(stderr, "sotto stream: session %s is gone (sottod restarted, "
	    "or no reconnect within its grace period): finals after %lld "
	    "are lost; a new session goes on from %.2f s of the audio (the "
	    "end of the last final)\n",
	    r->out.session, (long long)r->last_final, from < r->frames.n ?
	    r->frames.f[from].t : r->frames.seconds);
	if (stream_open_frame(&r->c, o, r->is_stdin) != 0)
		return -1;
	r->frame0 = from;
	r->out.time_offset = from < r->frames.n ? r->frames.f[from].t :
	    r->frames.seconds;
	r->last_final = -1;
	r->last_final_end = 0;
	r->out.session[0] = '\0';
	stream_resend(r, from);
	r->resuming = 0;
	return 0;
}

/*
 * An event while a resume waits for its answer: 0 to print it, or 2 to
 * connect again (the daemon closes the connection after an error): to
 * the session again, or for a new one when it is gone.
 */
int
stream_resume_answer(struct stream_run *r, const struct stream_opts *o,
    const char *type, struct json_object *ev)
{
	struct json_object *v;
	const char *code;

	if (strcmp(type, "opened") == 0) {
		stream_resumed(r, ev);
		return 0;
	}
	if (strcmp(type, "error") != 0)
		return 0;
	code = json_object_object_get_ex(ev, "code", &v) ?
	    json_object_get_string(v) : "";
	if (strcmp(code, "no_session") == 0)
		r->gone = 1;
	/* bad_order: the old connection still holds it; busy, shutdown */
	return 2;
}

/* Connect again and resume the session; 0, or an exit code. */
int
stream_resume(struct stream_run *r, const struct stream_opts *o)
{
	char err[512];

	if (++r->resumes > STREAM_RESUMES_MAX) {
		fprintf(stderr, "sotto stream: %d resumes failed: giving up; "
		    "the transcript after final %lld is lost\n",
		    STREAM_RESUMES_MAX, (long long)r->last_final);
		return EXIT_DAEMON;
	}
	if (r->out.session[0] == '\0' && !r->gone) {
		/* lost before its session was opened: open it again */
		fprintf(stderr, "sotto stream: lost the connection to sottod "
		    "before the session was opened; opening it again\n");
		r->gone = 1;
	} else if (!r->gone && !r->resuming)
		fprintf(stderr, "sotto stream: lost the connection to sottod; "
		    "resuming session %s after final %lld\n", r->out.session,
		    (long long)r->last_final);
	if (stream_reconnect(&r->c, r->path, r->gone ? NULL : r->out.session,
	    r->last_final, r->out.last_unit, STREAM_RESUME_S, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto stream: %s; gave up after %d s: the "
		    "transcript after final %lld (%.1f s of audio) is lost\n",
		    err, STREAM_RESUME_S, (long long)r->last_final,
		    r->frames.seconds - r->out.time_offset -
		    r->last_final_end);
		return EXIT_DAEMON;
	}
	if (r->gone) {
		r->gone = 0;
		return stream_new_session(r, o) == 0 ? 0 : EXIT_USAGE;
	}
	r->resuming = 1;
	return 0;
}
