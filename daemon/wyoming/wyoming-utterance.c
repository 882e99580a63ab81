/*
 * A Wyoming utterance (wyoming.c reads its events).
 *
 * DESIGN
 * An utterance starts with audio-start (or its first audio-chunk) after
 * an optional transcribe (language). It opens a live session, as OPEN
 * does, fed the audio as 16 kHz mono floats: any rate, width and channel
 * count is decoded and resampled here by a source_client with the
 * resampler `sotto transcribe` uses, and a format that changes between
 * chunks starts a new decoder. Each final of the session goes out at
 * once as a transcript-chunk (wyoming.c) when it closes a caption unit:
 * a chunk is a unit (docs/protocol.md, "Caption units"), a sentence or a
 * caption line, as every door shows them. The same samples are kept, up
 * to max_utterance_seconds.
 *
 * At audio-stop, [wyoming] answer chooses the transcript. live (the
 * default): the session is ended as END ends a socket stream (a live
 * stream's rest, and its words still tentative, decoded once from the
 * last committed word: worker_finish_at_once), its last chunks go out,
 * and at its "end" the finals, joined, are the transcript, in the
 * language asked for or the one the session detected. The utterance is
 * not decoded twice: the answer waits for the step running at audio-stop
 * and that one decode. whole: the session is dropped (words still
 * tentative then are not finished as chunks: that would cost another
 * decode before the answer) and the samples are transcribed whole on the
 * compute thread, as a WAV file in memory given to worker-file.c (as
 * `sotto transcribe` reads a file, with its options and [wyoming]
 * beam_size): slower, with a beam where the steps are greedy. Either way
 * the connection gets transcript and transcript-stop; events after
 * audio-stop wait in the input until then.
 *
 * SIGTERM: an utterance still open is over, and answered as at
 * audio-stop (live: the drain has finished its session already),
 * within shutdown_grace_seconds. When that runs out first (no decode
 * then, or one still running is canceled), transcript is what was
 * final: the chunks' text; an error (shutdown) when there is none.
 * Either way the client is answered before sottod closes.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "log.h"
#include "wyoming.h"

#define WY_WAV_FLOATS	11	/* a 44-byte WAV header, in front */

static worker_file_done_fn wy_transcribed;

/* The language a decode of this utterance asks for; NULL: detect. */
static const char *
wy_language(const struct wy_conn *c)
{
	const char *l = c->language[0] != '\0' ? c->language :
	    core_config()->language;

	if (!core_multilingual())
		return "en";
	return strcmp(l, "auto") == 0 ? NULL : l;
}

/* Forget the utterance; ready for the next. */
void
wy_reset(struct wy_conn *c)
{
	source_client_free(c->src);
	c->src = NULL;
	free(c->audio);
	c->audio = NULL;
	c->n_audio = c->cap_audio = 0;
	free(c->text);
	c->text = NULL;
	free(c->chunks);
	c->chunks = NULL;
	c->chunked = 0;
	c->flags = 0;
	c->language[0] = '\0';
	c->text_language[0] = '\0';
}

void
wy_keep_chunk(struct peer *p, struct wy_conn *c, const char *text)
{
	size_t have = c->chunks != NULL ? strlen(c->chunks) : 0;
	char *t;

	if ((t = realloc(c->chunks, have + strlen(text) + 1)) == NULL) {
		log_warnx("wyoming peer %llu: out of memory",
		    (unsigned long long)p->id);
		return;
	}
	memcpy(t + have, text, strlen(text) + 1);
	c->chunks = t;
}

void
wy_send_rest(struct peer *p, struct wy_conn *c)
{
	size_t have = c->chunks != NULL ? strlen(c->chunks) : 0;

	if (c->chunked >= have)
		return;
	wy_send_text(p, "transcript-chunk", "text", c->chunks + c->chunked);
	c->chunked = have;
}

/* Keep n samples of the utterance and feed them to its session. */
static int
wy_push(struct peer *p, struct wy_conn *c, const float *pcm, size_t n,
    int to_session)
{
	size_t max = (size_t)core_config()->wyoming_max_utterance_s *
	    SOTTO_SAMPLE_RATE, cap;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	float *a;

	if (c->n_audio + n > max) {
		peer_fail(p, PROTO_E_TOO_LARGE, "the utterance is longer than "
		    "%d s (max_utterance_seconds)",
		    core_config()->wyoming_max_utterance_s);
		return -1;
	}
	if (c->n_audio + n > c->cap_audio) {
		cap = (c->n_audio + n) * 3 / 2 + SOTTO_SAMPLE_RATE;
		cap = cap < max ? cap : max;
		if ((a = realloc(c->audio, (WY_WAV_FLOATS + cap) *
		    sizeof(*a))) == NULL) {
			peer_fail(p, PROTO_E_INTERNAL, "out of memory");
			return -1;
		}
		c->audio = a;
		c->cap_audio = cap;
	}
	memcpy(c->audio + WY_WAV_FLOATS + c->n_audio, pcm, n * sizeof(*pcm));
	c->n_audio += n;
	if (!to_session || n == 0 || p->session == NULL)
		return 0;
	session_audio(p->session, (const uint8_t *)pcm, n * sizeof(*pcm),
	    msg, &e);
	if (e != PROTO_OK) {
		peer_fail(p, e, "audio-chunk: %s", msg);
		return -1;
	}
	return 0;
}

/* The decoder's last samples, then no decoder. */
static int
wy_flush(struct peer *p, struct wy_conn *c, int to_session)
{
	const float *pcm;
	size_t n;
	char msg[PROTO_MSG_MAX];
	int rc = 0;

	if (c->src == NULL)
		return 0;
	if (source_client_flush(c->src, &pcm, &n, msg) != PROTO_OK)
		log_warnx("wyoming peer %llu: resampler tail lost: %s",
		    (unsigned long long)p->id, msg);
	else
		rc = wy_push(p, c, pcm, n, to_session);
	source_client_free(c->src);
	c->src = NULL;
	return rc;
}

/* Decode audio of this format from now on. */
static int
wy_format(struct peer *p, struct wy_conn *c, const struct wy_event *ev)
{
	char msg[PROTO_MSG_MAX];

	if (c->src != NULL && ev->rate == c->rate && ev->width == c->width &&
	    ev->channels == c->channels)
		return 0;
	if (wy_flush(p, c, 1) != 0)
		return -1;
	c->src = source_client_new_quality(ev->width == 2 ?
	    PROTO_FORMAT_S16LE : PROTO_FORMAT_F32LE, ev->rate, ev->channels,
	    SOURCE_QUALITY_FILE, msg);
	if (c->src == NULL) {
		peer_fail(p, PROTO_E_INTERNAL, "%s", msg);
		return -1;
	}
	c->rate = ev->rate;
	c->width = ev->width;
	c->channels = ev->channels;
	log_debug("wyoming peer %llu: audio at %d Hz, %d bytes x %d",
	    (unsigned long long)p->id, c->rate, c->width, c->channels);
	return 0;
}

/* audio-start, or a first audio-chunk: open the utterance's session. */
int
wy_open(struct peer *p, struct wy_conn *c, const struct wy_event *ev)
{
	struct session *s;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];

	if (core_draining()) {
		peer_fail(p, PROTO_E_SHUTDOWN, "sottod is stopping");
		return -1;
	}
	if ((s = session_open_live(p, c->language, "", 0, 0, msg,
	    &e)) == NULL) {
		peer_fail(p, e, "transcribe: %s", msg);
		return -1;
	}
	session_answer_first(s);
	peer_timer(p);
	c->flags |= WY_OPEN;
	if (wy_format(p, c, ev) != 0)
		return -1;
	wy_send_text(p, "transcript-start", "language", wy_language(c));
	return 0;
}

void
wy_chunk(struct peer *p, struct wy_conn *c, const struct wy_event *ev,
    const uint8_t *payload, size_t len)
{
	size_t frame = (size_t)ev->width * ev->channels, n = len / ev->width;
	const uint8_t *bytes = payload;
	const float *pcm;
	enum proto_error e;
	char msg[PROTO_MSG_MAX];
	float *f;

	if (len % frame != 0)
		return peer_fail(p, PROTO_E_BAD_VALUE, "audio-chunk: %zu bytes "
		    "is not a whole number of %zu-byte frames", len, frame);
	if (wy_format(p, c, ev) != 0)
		return;
	if (ev->width != 2 && n > 0) {
		if (n > c->cap_scratch) {
			if ((f = realloc(c->scratch, n * sizeof(*f))) == NULL)
				return peer_fail(p, PROTO_E_INTERNAL,
				    "out of memory");
			c->scratch = f;
			c->cap_scratch = n;
		}
		wy_pcm_float(payload, n, ev->width, c->scratch);
		bytes = (const uint8_t *)c->scratch;
		len = n * sizeof(float);
	}
	if ((e = source_client_decode(c->src, bytes, len, &pcm, &n, msg)) !=
	    PROTO_OK)
		return peer_fail(p, e, "audio-chunk: %s", msg);
	wy_push(p, c, pcm, n, 1);
}

/* Little-endian integers of a WAV header. */
static uint8_t *
wy_le(uint8_t *p, uint32_t v, int bytes)
{
	int i;

	for (i = 0; i < bytes; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

/*
 * The utterance as a WAV file in memory: 32-bit float, 16 kHz, mono,
 * its header in the WY_WAV_FLOATS kept in front of the samples.
 */
static void
wy_wav(struct wy_conn *c)
{
	uint32_t data = (uint32_t)(c->n_audio * sizeof(float));
	uint8_t *h = (uint8_t *)c->audio;

	memcpy(h, "RIFF", 4);
	h = wy_le(h + 4, 36 + data, 4);
	memcpy(h, "WAVEfmt ", 8);
	h = wy_le(h + 8, 16, 4);
	h = wy_le(h, 3, 2);			/* IEEE float */
	h = wy_le(h, 1, 2);
	h = wy_le(h, SOTTO_SAMPLE_RATE, 4);
	h = wy_le(h, SOTTO_SAMPLE_RATE * sizeof(float), 4);
	h = wy_le(h, sizeof(float), 2);
	h = wy_le(h, 32, 2);
	memcpy(h, "data", 4);
	wy_le(h + 4, data, 4);
}

/* The finals' text, without white space around it (NULL: no memory). */
static char *
wy_chunks_text(const struct wy_conn *c)
{
	const char *t = c->chunks != NULL ? c->chunks : "";
	size_t n;

	while (isspace((unsigned char)*t))
		t++;
	for (n = strlen(t); n > 0 && isspace((unsigned char)t[n - 1]); n--)
		;
	return strndup(t, n);
}

/* The grace of a SIGTERM is over: what was final, else an error. */
static void
wy_answer_stopping(struct peer *p, struct wy_conn *c)
{
	if ((c->text = wy_chunks_text(c)) == NULL)
		return peer_fail(p, PROTO_E_INTERNAL, "out of memory");
	if (c->text[0] == '\0') {
		free(c->text);
		c->text = NULL;
		return peer_fail(p, PROTO_E_SHUTDOWN, "sottod is stopping: "
		    "the utterance was not transcribed in time "
		    "(shutdown_grace_seconds)");
	}
	log_info("wyoming peer %llu: stopping: the transcript is the live "
	    "finals", (unsigned long long)p->id);
	c->flags |= WY_TEXT_DONE;
	wy_finish(p);
}

/*
 * answer = live: the session is over ("end"): every word it was given is
 * final, and its finals, joined, are the transcript, in the language it
 * was asked for or detected. A drain whose grace ran out ended it
 * early: then as at any such stop.
 */
void
wy_answer_live(struct peer *p, struct wy_conn *c)
{
	const char *lang;

	wy_send_rest(p, c);
	if (core_draining() > 1)
		return wy_answer_stopping(p, c);
	if ((c->text = wy_chunks_text(c)) == NULL)
		return peer_fail(p, PROTO_E_INTERNAL, "out of memory");
	if (c->text_language[0] == '\0' && (lang = wy_language(c)) != NULL)
		snprintf(c->text_language, sizeof(c->text_language), "%s",
		    lang);
	log_info("wyoming peer %llu: transcript from the live session",
	    (unsigned long long)p->id);
	c->flags |= WY_TEXT_DONE;
	wy_finish(p);
}

/*
 * answer = live: the live session's finals are the transcript. The
 * session is ended (session_end: the audio it has not decoded yet, then
 * the words still tentative, decoded once more from the last committed
 * word, greedy as every step) and its "end" answers (wy_ended ->
 * wy_answer_live).
 */
static void
wy_stop_live(struct peer *p, struct wy_conn *c)
{
	c->flags |= WY_STOPPED | WY_LIVE;
	p->state = PEER_ENDING;
	peer_timer(p);
	session_end(p->session);
}

/*
 * answer = whole, or no session to finish: the live session goes (freed
 * on the next loop turn, its last step dropped) and the utterance is
 * transcribed whole as a file (worker-file.c, as `sotto transcribe`
 * reads one); the compute thread runs at most one more step of the
 * session before it.
 */
static void
wy_stop_whole(struct peer *p, struct wy_conn *c)
{
	struct worker_file_params fp;
	const char *lang = wy_language(c);
	char msg[PROTO_MSG_MAX];

	if (p->session != NULL)
		session_detach(p->session, p);
	/*
	 * The open unit's committed words: the chunks hold every final, so
	 * the transcript of a drain that runs out is still their text.
	 */
	wy_send_rest(p, c);
	p->state = PEER_ENDING;
	c->flags |= WY_STOPPED;
	peer_timer(p);
	if (c->n_audio == 0) {
		c->text = strdup("");
		c->flags |= WY_TEXT_DONE;
		return wy_finish(p);
	}
	if (core_draining() > 1)	/* the grace is over: no decode */
		return wy_answer_stopping(p, c);
	memset(&fp, 0, sizeof(fp));
	snprintf(fp.language, sizeof(fp.language), "%s", lang ? lang : "");
	fp.task = SOTTO_TASK_TRANSCRIBE;
	fp.beam_size = core_config()->wyoming_beam_size;
	wy_wav(c);
	p->flags |= PEER_BUSY;
	if (worker_file_new(p->id, c->audio, WY_WAV_FLOATS * sizeof(float) +
	    c->n_audio * sizeof(float), &fp, wy_transcribed, NULL,
	    msg) == NULL) {
		c->audio = NULL;
		return peer_fail(p, PROTO_E_INTERNAL, "%s", msg);
	}
	c->audio = NULL;
	c->n_audio = c->cap_audio = 0;
}

/*
 * The audio is over (audio-stop, or a drain ended the session): answer
 * with the live session finished ([wyoming] answer = live), or with the
 * utterance decoded again whole (answer = whole). A session a drain
 * already ended has decoded all it was given: its finals answer.
 */
void
wy_stop(struct peer *p, struct wy_conn *c)
{
	int live = strcmp(core_config()->wyoming_answer, "live") == 0;

	if (wy_flush(p, c, live) != 0)
		return;
	if (live && p->session != NULL && !session_done(p->session))
		return wy_stop_live(p, c);
	if (live && p->session == NULL) {	/* ended by a drain */
		c->flags |= WY_STOPPED | WY_LIVE;
		p->state = PEER_ENDING;
		return wy_answer_live(p, c);
	}
	wy_stop_whole(p, c);
}

void
wy_audio_stop(struct peer *p, struct wy_conn *c)
{
	if (!(c->flags & WY_OPEN)) {
		/* No audio: an empty transcript, as streamed. */
		wy_send_text(p, "transcript-start", NULL, NULL);
		wy_send_text(p, "transcript", "text", "");
		wy_send_text(p, "transcript-stop", NULL, NULL);
		return;
	}
	wy_stop(p, c);
}

/* The whole-utterance transcript is in: send it; ready for another. */
void
wy_finish(struct peer *p)
{
	struct wy_conn *c = p->front;
	const char *kv[4];

	if (!(c->flags & WY_TEXT_DONE) || (p->flags & (PEER_DEAD | PEER_CLOSING)))
		return;
	kv[0] = "text";
	kv[1] = c->text;
	kv[2] = "language";
	kv[3] = c->text_language[0] != '\0' ? c->text_language : NULL;
	wy_send(p, wy_write("transcript", kv, 2));
	wy_send_text(p, "transcript-stop", NULL, NULL);
	log_info("wyoming peer %llu: transcript of %zu characters",
	    (unsigned long long)p->id, strlen(c->text));
	wy_reset(c);
	p->state = PEER_READY;
	p->flags &= ~PEER_BUSY;
	peer_timer(p);
	if (core_draining() || (p->flags & PEER_EOF)) {
		peer_close_after_flush(p);
		return;
	}
	if (!(p->flags & (PEER_DEAD | PEER_CLOSING)))
		bufferevent_trigger(p->bev, EV_READ,
		    BEV_TRIG_IGNORE_WATERMARKS | BEV_TRIG_DEFER_CALLBACKS);
}

/* The segments joined, without white space around them. */
static char *
wy_join(const struct sotto_result *r)
{
	size_t len = 1, i, at = 0;
	char *s;
	int k;

	for (k = 0; k < r->n_segments; k++)
		len += strlen(r->segments[k].text);
	if ((s = malloc(len)) == NULL)
		return NULL;
	for (k = 0; k < r->n_segments; k++) {
		i = strlen(r->segments[k].text);
		memcpy(s + at, r->segments[k].text, i);
		at += i;
	}
	while (at > 0 && isspace((unsigned char)s[at - 1]))
		at--;
	s[at] = '\0';
	for (i = 0; isspace((unsigned char)s[i]); i++)
		;
	memmove(s, s + i, at - i + 1);
	return s;
}

/* The whole-utterance transcript (worker-file.c's done; frees f). */
static void
wy_transcribed(struct worker_file *f, void *arg)
{
	static const enum proto_error codes[] = {
		[WORKER_FILE_BAD_INPUT] = PROTO_E_INTERNAL,
		[WORKER_FILE_FAILED] = PROTO_E_INTERNAL,
		[WORKER_FILE_CANCELED] = PROTO_E_SHUTDOWN,
	};
	struct peer *p;
	struct wy_conn *c;

	if ((p = wy_find(f->id)) == NULL ||
	    (p->flags & (PEER_DEAD | PEER_CLOSING))) {
		worker_file_free(f);
		return;
	}
	c = p->front;
	if (f->error == WORKER_FILE_CANCELED && core_draining()) {
		worker_file_free(f);
		return wy_answer_stopping(p, c);
	}
	if (f->error != WORKER_FILE_OK) {
		peer_fail(p, codes[f->error], "transcribe: %s", f->err);
		worker_file_free(f);
		return;
	}
	c->text = wy_join(f->res);
	snprintf(c->text_language, sizeof(c->text_language), "%s",
	    f->res->language != NULL ? f->res->language : "");
	log_info("wyoming peer %llu: transcript from the whole utterance "
	    "(%.2f s of compute)", (unsigned long long)p->id, f->compute_s);
	worker_file_free(f);
	if (c->text == NULL)
		return peer_fail(p, PROTO_E_INTERNAL, "out of memory");
	c->flags |= WY_TEXT_DONE;
	wy_finish(p);
}
