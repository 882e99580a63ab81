/*
 * A Deepgram connection's audio and its live sessions.
 *
 * The client's audio (linear16 at any rate, or 8-bit G.711 expanded to
 * PCM here, any number of channels, averaged into one) is resampled to
 * 16 kHz floats by a source_client with `sotto transcribe`'s resampler,
 * so that the stream hears what the file would, and goes to a live
 * session (the sottod protocol's OPEN, f32le at 16 kHz, with word
 * timestamps). Finalize ends that session: the rest of its audio is
 * decoded and its finals go out with from_finalize; audio that comes
 * meanwhile waits here (up to DG_WAIT_MAX_S seconds) for the next
 * session, which opens when the first one has ended and counts its
 * times on from where the first stopped. CloseStream ends it too, then
 * Metadata and the close.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "deepgram-private.h"
#include "source-g711.h"

/* Audio waiting while a session ends: bounded, as a lagging stream. */
#define DG_WAIT_MAX_S	120

static int
dg_oom(struct dg_conn *c, char *msg)
{
	snprintf(msg, PROTO_MSG_MAX, "out of memory");
	c->err = PROTO_E_INTERNAL;
	return -1;
}

/*
 * The connection's session: OPEN f32le 16 kHz, live, with words, the
 * keywords as its vocabulary and, with diarize, speaker labels.
 */
static int
dg_open(struct dg_conn *c, char *msg)
{
	enum proto_error e;

	if (session_open_live(c->ws.peer, c->prm.language, c->prm.prompt, 1,
	    c->prm.diarize, msg, &e) == NULL) {
		c->err = e;
		return -1;
	}
	c->base = c->fed;
	return 0;
}

/* n samples to the session (opened on the first of them). */
static int
dg_feed(struct dg_conn *c, const float *pcm, size_t n, char *msg)
{
	enum proto_error e;

	if (n == 0)
		return 0;
	if (c->ws.peer->session == NULL && dg_open(c, msg) != 0)
		return -1;
	session_audio(c->ws.peer->session, (const uint8_t *)pcm, n * sizeof(*pcm),
	    msg, &e);
	c->err = e;
	if (e != PROTO_OK)
		return -1;
	c->fed += n;
	return 0;
}

/* While a session ends, its successor's audio waits here. */
static int
dg_wait(struct dg_conn *c, const float *pcm, size_t n, char *msg)
{
	size_t cap;
	float *a;

	if (c->n_wait + n > (size_t)DG_WAIT_MAX_S * SOTTO_SAMPLE_RATE) {
		snprintf(msg, PROTO_MSG_MAX, "more than %d s of audio wait "
		    "for a Finalize to be decoded: send it no faster than it "
		    "is decoded", DG_WAIT_MAX_S);
		c->err = PROTO_E_BUSY;
		return -1;
	}
	if (c->n_wait + n > c->cap_wait) {
		cap = (c->n_wait + n) * 3 / 2 + SOTTO_SAMPLE_RATE;
		if ((a = realloc(c->wait, cap * sizeof(*a))) == NULL)
			return dg_oom(c, msg);
		c->wait = a;
		c->cap_wait = cap;
	}
	memcpy(c->wait + c->n_wait, pcm, n * sizeof(*pcm));
	c->n_wait += n;
	return 0;
}

/* The resampler for the connection's encoding, made once. */
static int
dg_source(struct dg_conn *c, char *msg)
{
	if (c->src != NULL)
		return 0;
	/* `sotto transcribe`'s resampler: 8 kHz telephone audio loses
	   words through the fastest one, and one mono stream is cheap */
	c->src = source_client_new_quality(PROTO_FORMAT_S16LE,
	    c->prm.sample_rate, c->prm.channels, SOURCE_QUALITY_FILE, msg);
	if (c->src == NULL)
		c->err = PROTO_E_INTERNAL;
	return c->src != NULL ? 0 : -1;
}

/* G.711 bytes as s16le in c->g711; *b and *len then point there. */
static int
dg_expand(struct dg_conn *c, const uint8_t **b, size_t *len, char *msg)
{
	int16_t *s;

	if (*len > c->cap_g711) {
		if ((s = realloc(c->g711, *len * sizeof(*s))) == NULL)
			return dg_oom(c, msg);
		c->g711 = s;
		c->cap_g711 = *len;
	}
	g711_decode(c->prm.encoding == DG_ENC_ALAW ? G711_ALAW : G711_ULAW,
	    *b, *len, c->g711);
	*b = (const uint8_t *)c->g711;
	*len *= sizeof(*s);
	return 0;
}

int
dg_audio(struct dg_conn *c, const uint8_t *b, size_t len, char *msg)
{
	const float *pcm;
	size_t n;

	if (c->ending == DG_END_CLOSE || c->close_after || len == 0)
		return 0;	/* after CloseStream: nothing more is heard */
	sha256_update(&c->sha, len, b);
	c->bytes += len;
	if (dg_source(c, msg) != 0)
		return -1;
	if (c->prm.encoding != DG_ENC_LINEAR16 && dg_expand(c, &b, &len,
	    msg) != 0)
		return -1;
	c->err = source_client_decode(c->src, b, len, &pcm, &n, msg);
	if (c->err != PROTO_OK)
		return -1;
	if (c->ending != DG_END_NONE)
		return dg_wait(c, pcm, n, msg);
	if (dg_feed(c, pcm, n, msg) != 0)
		return -1;
	dg_utterance_check(c, (double)c->fed / SOTTO_SAMPLE_RATE);
	return 0;
}

/* CloseStream is done: the stream's Metadata, then a normal close. */
static void
dg_closed(struct dg_conn *c)
{
	dg_utterance_check(c, 1e30);
	dg_send_metadata(c);
	peer_close_after_flush(c->ws.peer);
}

/* The resampler's last samples, at the end of the stream. */
static void
dg_flush(struct dg_conn *c)
{
	const float *pcm;
	size_t n;
	char msg[PROTO_MSG_MAX];

	if (c->src != NULL && c->ws.peer->session != NULL &&
	    source_client_flush(c->src, &pcm, &n, msg) == PROTO_OK)
		(void)dg_feed(c, pcm, n, msg);
}

/*
 * Finalize or CloseStream: the session ends (the rest of its audio is
 * decoded first); with none open there is nothing to decode.
 */
void
dg_finalize(struct dg_conn *c, enum dg_ending how)
{
	struct peer *p = c->ws.peer;

	if (c->ending == DG_END_CLOSE)
		return;
	if (c->ending == DG_END_FINALIZE) {	/* its end will close */
		if (how == DG_END_CLOSE)
			c->close_after = 1;
		return;
	}
	if (how == DG_END_CLOSE)
		dg_flush(c);
	if (p->session == NULL) {
		c->ending = how;
		if (how == DG_END_FINALIZE)
			dg_finalize_done(c);
		else
			dg_closed(c);
		c->ending = how == DG_END_CLOSE ? DG_END_CLOSE : DG_END_NONE;
		return;
	}
	c->ending = how;
	p->state = PEER_ENDING;
	peer_timer(p);		/* waiting for the results is not idle */
	session_end(p->session);
}

/* The audio that waited goes to a new session. */
static void
dg_resume(struct dg_conn *c)
{
	char msg[PROTO_MSG_MAX];
	size_t n = c->n_wait;

	c->n_wait = 0;
	if (dg_feed(c, c->wait, n, msg) != 0)
		peer_fail(c->ws.peer, c->err, "%s", msg);
}

/* The session has ended: after a Finalize the next one may open. */
void
dg_session_over(struct dg_conn *c)
{
	struct peer *p = c->ws.peer;
	enum dg_ending how = c->ending;

	if (p->session != NULL)
		session_detach(p->session, p);
	p->state = PEER_READY;
	peer_timer(p);
	if (how == DG_END_FINALIZE)
		dg_finalize_done(c);
	c->ending = DG_END_NONE;
	if (how == DG_END_NONE || core_draining() || (p->flags & PEER_EOF)) {
		/* sottod is stopping: what was decoded, then the close */
		c->ending = DG_END_CLOSE;
		dg_closed(c);
		return;
	}
	if (how == DG_END_CLOSE) {	/* no audio waits: it was dropped */
		c->ending = DG_END_CLOSE;
		dg_closed(c);
		return;
	}
	if (c->n_wait > 0)
		dg_resume(c);
	if (c->close_after && !(p->flags & (PEER_DEAD | PEER_CLOSING))) {
		c->close_after = 0;
		dg_finalize(c, DG_END_CLOSE);
	}
}

void
dg_conn_free_audio(struct dg_conn *c)
{
	source_client_free(c->src);
	free(c->g711);
	free(c->wait);
	free(c->interim);
}
