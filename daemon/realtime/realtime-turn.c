/*
 * A Realtime connection's audio, turns and items.
 *
 * The client's audio (24 kHz PCM, or 8 kHz G.711 expanded to PCM here)
 * is resampled to 16 kHz floats by a source_client, as Wyoming's is, so
 * that the VAD and the sessions see the same samples. With turn
 * detection null, everything appended goes to the item being filled
 * until the client commits. With server_vad the daemon's Silero VAD
 * cuts the audio: speech_started when a chunk's speech probability
 * reaches the threshold (the item starts prefix_padding_ms earlier),
 * speech_stopped and a commit after silence_duration_ms below it;
 * audio outside speech goes to no item.
 *
 * Each item is one live session (the sottod protocol's OPEN, f32le at
 * 16 kHz). A connection owns one session at a time, so the audio of the
 * items after the one decoding waits here, up to RT_WAIT_MAX_S seconds
 * of it, and their sessions open in turn (realtime-item.c has what the
 * sessions say).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "realtime-private.h"
#include "source-g711.h"

/* Audio waiting behind a decoding item: bounded, as a lagging stream. */
#define RT_WAIT_MAX_S	120

static struct rt_item *
rt_item_new(struct rt_conn *c)
{
	struct rt_item *it;

	if ((it = calloc(1, sizeof(*it))) == NULL)
		return NULL;
	snprintf(it->id, sizeof(it->id), "item_%llu_%llu",
	    (unsigned long long)c->ws.peer->id,
	    (unsigned long long)++c->n_items);
	TAILQ_INSERT_TAIL(&c->items, it, entry);
	c->filling = it;
	return it;
}

void
rt_item_free(struct rt_conn *c, struct rt_item *it)
{
	TAILQ_REMOVE(&c->items, it, entry);
	if (c->filling == it)
		c->filling = NULL;
	c->waiting -= it->n_pcm;
	free(it->pcm);
	free(it->text);
	free(it);
}

void
rt_free_items(struct rt_conn *c)
{
	while (!TAILQ_EMPTY(&c->items))
		rt_item_free(c, TAILQ_FIRST(&c->items));
}

/*
 * The item's session: OPEN f32le 16 kHz, live, in the set language, with
 * the set prompt, and speaker labels with the diarizing model (they go
 * on from the connection's last item: PEER_KEEP_SPEAKERS).
 */
static int
rt_item_open(struct rt_conn *c, struct rt_item *it, char *msg)
{
	struct session *s;
	enum proto_error e;

	if ((s = session_open_live(c->ws.peer, c->cfg.language, c->cfg.prompt,
	    0, c->cfg.diarize, msg, &e)) == NULL) {
		c->err = e;
		return -1;
	}
	session_answer_first(s);
	it->open = 1;
	return 0;
}

static int
rt_session_audio(struct rt_conn *c, const float *pcm, size_t n, char *msg)
{
	enum proto_error e;

	if (n == 0 || c->ws.peer->session == NULL)
		return 0;
	session_audio(c->ws.peer->session, (const uint8_t *)pcm,
	    n * sizeof(*pcm), msg, &e);
	c->err = e;
	return e == PROTO_OK ? 0 : -1;
}

/* n samples for the item being filled (a new one if none is). */
static int
rt_item_add(struct rt_conn *c, const float *pcm, size_t n, char *msg)
{
	struct rt_item *it = c->filling;
	size_t cap;
	float *a;

	if (it == NULL && (it = rt_item_new(c)) == NULL)
		goto oom;
	it->samples += n;
	if (it == TAILQ_FIRST(&c->items)) {
		if (!it->open && rt_item_open(c, it, msg) != 0)
			return -1;
		return rt_session_audio(c, pcm, n, msg);
	}
	if (c->waiting + n > (size_t)RT_WAIT_MAX_S * SOTTO_SAMPLE_RATE) {
		snprintf(msg, PROTO_MSG_MAX, "more than %d s of audio wait "
		    "behind the item being transcribed: send it no faster "
		    "than it is decoded", RT_WAIT_MAX_S);
		c->err = PROTO_E_BUSY;
		return -1;
	}
	if (it->n_pcm + n > it->cap_pcm) {
		cap = (it->n_pcm + n) * 3 / 2 + SOTTO_SAMPLE_RATE;
		if ((a = realloc(it->pcm, cap * sizeof(*a))) == NULL)
			goto oom;
		it->pcm = a;
		it->cap_pcm = cap;
	}
	memcpy(it->pcm + it->n_pcm, pcm, n * sizeof(*pcm));
	it->n_pcm += n;
	c->waiting += n;
	return 0;
oom:
	snprintf(msg, PROTO_MSG_MAX, "out of memory");
	c->err = PROTO_E_INTERNAL;
	return -1;
}

/* The first item: its session ends, the rest is decoded, then "end". */
static void
rt_item_end(struct rt_conn *c, struct rt_item *it)
{
	if (it != TAILQ_FIRST(&c->items) || !it->committed)
		return;
	if (!it->open) {		/* no audio reached it: nothing to say */
		rt_send_completed(c, it);
		rt_item_free(c, it);
		rt_next(c);
		return;
	}
	c->ws.peer->state = PEER_ENDING;
	session_end(c->ws.peer->session);
}

int
rt_commit(struct rt_conn *c, char *msg)
{
	struct rt_item *it = c->filling;

	if (it == NULL || it->samples == 0) {
		snprintf(msg, PROTO_MSG_MAX, "the input audio buffer is empty: "
		    "append audio before committing it");
		return -1;
	}
	it->committed = 1;
	c->filling = NULL;
	c->speaking = 0;
	c->silence = 0;
	rt_send_committed(c, it);
	rt_item_end(c, it);
	return 0;
}

/* The item being filled is dropped, its session with it. */
void
rt_clear(struct rt_conn *c)
{
	struct rt_item *it = c->filling;

	c->n_ring = 0;
	c->speaking = 0;
	c->silence = 0;
	if (it != NULL) {
		if (it->open && c->ws.peer->session != NULL) {
			session_detach(c->ws.peer->session, c->ws.peer);
			c->ws.peer->state = PEER_READY;
		}
		rt_item_free(c, it);
	}
	rt_send(c, rt_event("input_audio_buffer.cleared"));
}

/* The next item, if any, opens its session with the audio it waited. */
void
rt_next(struct rt_conn *c)
{
	struct rt_item *it = TAILQ_FIRST(&c->items);
	char msg[PROTO_MSG_MAX];

	if (it == NULL || it->open || (it->n_pcm == 0 && !it->committed))
		return;
	if (it->n_pcm > 0) {
		if (rt_item_open(c, it, msg) != 0 ||
		    rt_session_audio(c, it->pcm, it->n_pcm, msg) != 0)
			return peer_fail(c->ws.peer, c->err, "%s", msg);
		c->waiting -= it->n_pcm;
		free(it->pcm);
		it->pcm = NULL;
		it->n_pcm = it->cap_pcm = 0;
	}
	rt_item_end(c, it);
}

/* Keep the last prefix_padding_ms of audio outside speech. */
static void
rt_ring_push(struct rt_conn *c, const float *pcm, size_t n)
{
	size_t keep = (size_t)c->cfg.prefix_padding_ms * SOTTO_SAMPLE_RATE /
	    1000, drop;

	if (keep == 0 || c->ring == NULL)
		return;
	if (n >= keep) {
		memcpy(c->ring, pcm + n - keep, keep * sizeof(*pcm));
		c->n_ring = keep;
		return;
	}
	if (c->n_ring + n > keep) {
		drop = c->n_ring + n - keep;
		memmove(c->ring, c->ring + drop, (c->n_ring - drop) *
		    sizeof(*pcm));
		c->n_ring -= drop;
	}
	memcpy(c->ring + c->n_ring, pcm, n * sizeof(*pcm));
	c->n_ring += n;
}

/* One VAD chunk: a turn starts, goes on, or ends with a commit. */
static int
rt_vad_chunk(struct rt_conn *c, char *msg)
{
	float prob = sotto_vad_chunk(c->vad, c->chunk);
	uint64_t at = c->heard - SOTTO_VAD_CHUNK;	/* its first sample */

	if (!c->speaking) {
		if (prob < c->cfg.threshold) {
			rt_ring_push(c, c->chunk, SOTTO_VAD_CHUNK);
			return 0;
		}
		c->speaking = 1;
		c->silence = 0;
		if (c->filling == NULL && rt_item_new(c) == NULL) {
			snprintf(msg, PROTO_MSG_MAX, "out of memory");
			c->err = PROTO_E_INTERNAL;
			return -1;
		}
		rt_send_item(c, "input_audio_buffer.speech_started",
		    c->filling->id, "audio_start_ms", json_object_new_int64(
		    (int64_t)(at - c->n_ring) * 1000 / SOTTO_SAMPLE_RATE));
		if (rt_item_add(c, c->ring, c->n_ring, msg) != 0)
			return -1;
		c->n_ring = 0;
	}
	if (rt_item_add(c, c->chunk, SOTTO_VAD_CHUNK, msg) != 0)
		return -1;
	c->silence = prob < c->cfg.threshold ? c->silence + SOTTO_VAD_CHUNK :
	    0;
	if (c->silence * 1000 < (size_t)c->cfg.silence_duration_ms *
	    SOTTO_SAMPLE_RATE)
		return 0;
	rt_send_item(c, "input_audio_buffer.speech_stopped", c->filling->id,
	    "audio_end_ms", json_object_new_int64((int64_t)c->heard * 1000 /
	    SOTTO_SAMPLE_RATE));
	return rt_commit(c, msg);
}

/* 16 kHz samples in: to the VAD's chunks, or straight to the item. */
static int
rt_pcm(struct rt_conn *c, const float *pcm, size_t n, char *msg)
{
	size_t k;

	if (!c->cfg.server_vad) {
		c->heard += n;
		return rt_item_add(c, pcm, n, msg);
	}
	while (n > 0) {
		k = SOTTO_VAD_CHUNK - c->n_chunk;
		k = k < n ? k : n;
		memcpy(c->chunk + c->n_chunk, pcm, k * sizeof(*pcm));
		c->n_chunk += k;
		c->heard += k;
		pcm += k;
		n -= k;
		if (c->n_chunk < SOTTO_VAD_CHUNK)
			continue;
		c->n_chunk = 0;
		if (rt_vad_chunk(c, msg) != 0)
			return -1;
	}
	return 0;
}

/* The decoder for the session's format (a new one when it changed). */
static int
rt_source(struct rt_conn *c, char *msg)
{
	if (c->src != NULL && c->src_format == c->cfg.format)
		return 0;
	source_client_free(c->src);
	/* `sotto transcribe`'s resampler: 8 kHz telephone audio loses
	   words through the fastest one, and one mono stream is cheap */
	c->src = source_client_new_quality(PROTO_FORMAT_S16LE, c->cfg.format ==
	    RT_FORMAT_PCM16 ? 24000 : 8000, 1, SOURCE_QUALITY_FILE, msg);
	c->src_format = c->cfg.format;
	return c->src != NULL ? 0 : -1;
}

int
rt_audio(struct rt_conn *c, const uint8_t *b, size_t len, char *msg)
{
	const float *pcm;
	int16_t *s;
	size_t n;

	if (rt_source(c, msg) != 0)
		return -1;
	if (c->cfg.format != RT_FORMAT_PCM16 && len > 0) {
		if (len > c->cap_g711) {
			if ((s = realloc(c->g711, len * sizeof(*s))) == NULL) {
				snprintf(msg, PROTO_MSG_MAX, "out of memory");
				c->err = PROTO_E_INTERNAL;
				return -1;
			}
			c->g711 = s;
			c->cap_g711 = len;
		}
		g711_decode(c->cfg.format == RT_FORMAT_PCMA ? G711_ALAW :
		    G711_ULAW, b, len, c->g711);
		b = (const uint8_t *)c->g711;
		len *= sizeof(*s);
	}
	if (source_client_decode(c->src, b, len, &pcm, &n, msg) != PROTO_OK)
		return -1;
	return rt_pcm(c, pcm, n, msg);
}

/* Apply a session update: the VAD's state and padding follow it. */
int
rt_configure(struct rt_conn *c, const struct rt_config *cfg, char *msg)
{
	size_t keep = (size_t)cfg->prefix_padding_ms * SOTTO_SAMPLE_RATE /
	    1000;
	float *r;

	if (cfg->server_vad && core_vad() == NULL) {
		snprintf(msg, PROTO_MSG_MAX, "server_vad needs sottod's Silero "
		    "VAD, which is off ([engine] vad = off): set turn_detection "
		    "to null and commit, or turn the VAD on");
		return -1;
	}
	if (cfg->diarize && session_check_speakers(msg) != 0)
		return -1;
	if (cfg->server_vad && c->vad == NULL &&
	    (c->vad = sotto_vad_state_new(core_vad())) == NULL)
		goto oom;
	if (keep > c->cap_ring) {
		if ((r = realloc(c->ring, keep * sizeof(*r))) == NULL)
			goto oom;
		c->ring = r;
		c->cap_ring = keep;
	}
	if (c->n_ring > keep)
		c->n_ring = 0;
	c->cfg = *cfg;
	return 0;
oom:
	snprintf(msg, PROTO_MSG_MAX, "out of memory");
	c->err = PROTO_E_INTERNAL;
	return -1;
}
