/*
 * Audio from clients (and the microphone's s16 frames): s16le or f32le
 * PCM at any rate and channel count, or Opus packets, decoded to 16 kHz
 * mono float with a streaming libsamplerate converter: the fastest for
 * live audio, or SOURCE_QUALITY_FILE's, the one `sotto transcribe` uses
 * (common/audio.c), so that the same samples give the same transcript.
 *
 * PCM may arrive split anywhere: a partial sample frame at the end of an
 * AUDIO payload is kept and completed by the next one. Every sample goes
 * through sotto_pcm_mix() before the resampler (NaN and infinities as 0,
 * the mix clipped to [-1, 1]), as `sotto transcribe`'s do. Each Opus packet
 * comes in its own AUDIO payload; libopus decodes it at 16 kHz directly
 * (one of its native rates), so Opus needs no resampler.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <opus.h>
#include <samplerate.h>

#include "source-client.h"
#include "source-g711.h"
#include "sotto.h"

#define SOURCE_CLIENT_OPUS_MAX	5760	/* 120 ms at 48 kHz, per channel */
#define SOURCE_CLIENT_BLOCK	256	/* sample frames converted at once */

struct source_client {
	enum proto_format	 format;
	int			 rate, channels;
	size_t			 frame_bytes;	/* one sample of each channel */
	uint8_t			 carry[PROTO_CHANNELS_MAX * 4];
	size_t			 n_carry;
	SRC_STATE		*src;		/* NULL at 16 kHz */
	OpusDecoder		*opus;
	float			*mono, *out;	/* scratch */
	size_t			 cap_mono, cap_out;
	/* interleaved floats of SOURCE_CLIENT_BLOCK frames, for mixing */
	float	 frames[SOURCE_CLIENT_BLOCK * PROTO_CHANNELS_MAX];
};

struct source_client *
source_client_new(enum proto_format format, int rate, int channels,
    char *msg)
{
	return source_client_new_quality(format, rate, channels,
	    SOURCE_QUALITY_LIVE, msg);
}

struct source_client *
source_client_new_quality(enum proto_format format, int rate, int channels,
    enum source_quality quality, char *msg)
{
	struct source_client *sc;
	int e;

	if ((sc = calloc(1, sizeof(*sc))) == NULL) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		return NULL;
	}
	sc->format = format;
	sc->rate = format == PROTO_FORMAT_OPUS ? SOTTO_SAMPLE_RATE : rate;
	sc->channels = channels;
	sc->frame_bytes = proto_format_sample_bytes(format) * channels;
	if (format == PROTO_FORMAT_OPUS) {
		sc->opus = opus_decoder_create(SOTTO_SAMPLE_RATE, channels, &e);
		if (sc->opus == NULL) {
			snprintf(msg, PROTO_MSG_MAX, "opus decoder: %s",
			    opus_strerror(e));
			goto fail;
		}
	} else if (rate != SOTTO_SAMPLE_RATE) {
		if ((sc->src = src_new(quality == SOURCE_QUALITY_FILE ?
		    SRC_SINC_MEDIUM_QUALITY : SRC_SINC_FASTEST, 1,
		    &e)) == NULL) {
			snprintf(msg, PROTO_MSG_MAX, "resampler: %s",
			    src_strerror(e));
			goto fail;
		}
	}
	return sc;
fail:
	source_client_free(sc);
	return NULL;
}

void
source_client_free(struct source_client *sc)
{
	if (sc == NULL)
		return;
	if (sc->src != NULL)
		src_delete(sc->src);
	if (sc->opus != NULL)
		opus_decoder_destroy(sc->opus);
	free(sc->mono);
	free(sc->out);
	free(sc);
}

static int
source_client_grow(float **p, size_t *cap, size_t n)
{
	float *q;

	if (n <= *cap)
		return 0;
	if ((q = realloc(*p, n * sizeof(*q))) == NULL)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

/* Sample frames of interleaved PCM bytes as floats, in sc->frames. */
static void
source_client_floats(struct source_client *sc, const uint8_t *p,
    size_t frames)
{
	size_t i, n = frames * sc->channels;
	int16_t s;

	for (i = 0; i < n; i++) {
		if (sc->format == PROTO_FORMAT_S16LE) {
			s = (int16_t)(p[0] | p[1] << 8);
			sc->frames[i] = s / 32768.0f;
			p += 2;
		} else if (sc->format == PROTO_FORMAT_MULAW ||
		    sc->format == PROTO_FORMAT_ALAW) {
			g711_decode(sc->format == PROTO_FORMAT_MULAW ?
			    G711_ULAW : G711_ALAW, p++, 1, &s);
			sc->frames[i] = s / 32768.0f;
		} else {
			memcpy(&sc->frames[i], p, 4);	/* little-endian */
			p += 4;
		}
	}
}

/*
 * Whole sample frames of p to mono at sc->mono + at, clipped and NaN as
 * 0 (sotto_pcm_mix), SOURCE_CLIENT_BLOCK frames at a time.
 */
static void
source_client_mix(struct source_client *sc, const uint8_t *p, size_t frames,
    size_t at)
{
	size_t k;

	for (; frames > 0; frames -= k) {
		k = frames < SOURCE_CLIENT_BLOCK ? frames : SOURCE_CLIENT_BLOCK;
		source_client_floats(sc, p, k);
		sotto_pcm_mix(sc->frames, k, sc->channels, sc->mono + at);
		p += k * sc->frame_bytes;
		at += k;
	}
}

/* PCM bytes, with the carried partial frame, to mono; returns frames. */
static long
source_client_pcm(struct source_client *sc, const uint8_t *p, size_t len)
{
	size_t n = 0, need, total = sc->n_carry + len;

	if (source_client_grow(&sc->mono, &sc->cap_mono,
	    total / sc->frame_bytes + 1) != 0)
		return -1;
	if (sc->n_carry > 0) {
		need = sc->frame_bytes - sc->n_carry;
		if (len < need) {
			memcpy(sc->carry + sc->n_carry, p, len);
			sc->n_carry += len;
			return 0;
		}
		memcpy(sc->carry + sc->n_carry, p, need);
		source_client_mix(sc, sc->carry, 1, n++);
		p += need;
		len -= need;
		sc->n_carry = 0;
	}
	source_client_mix(sc, p, len / sc->frame_bytes, n);
	n += len / sc->frame_bytes;
	p += len / sc->frame_bytes * sc->frame_bytes;
	len %= sc->frame_bytes;
	memcpy(sc->carry, p, len);
	sc->n_carry = len;
	return (long)n;
}

/* One Opus packet to mono; returns frames or -1 with msg. */
static long
source_client_opus(struct source_client *sc, const uint8_t *p, size_t len,
    char *msg)
{
	float pcm[SOURCE_CLIENT_OPUS_MAX * 2];
	int n;

	if (len == 0 || len > 1275 * 3) {
		snprintf(msg, PROTO_MSG_MAX, "an Opus packet is 1 to 3825 "
		    "bytes, not %zu", len);
		return -1;
	}
	n = opus_decode_float(sc->opus, p, (opus_int32)len, pcm,
	    SOURCE_CLIENT_OPUS_MAX, 0);
	if (n < 0) {
		snprintf(msg, PROTO_MSG_MAX, "bad Opus packet: %s",
		    opus_strerror(n));
		return -1;
	}
	if (source_client_grow(&sc->mono, &sc->cap_mono, (size_t)n + 1) != 0)
		return -1;
	sotto_pcm_mix(pcm, (size_t)n, sc->channels, sc->mono);
	return n;
}

/* Resample n mono frames (end: flush the converter). */
static enum proto_error
source_client_resample(struct source_client *sc, size_t n, int end,
    const float **ret, size_t *ret_n, char *msg)
{
	SRC_DATA d;
	double ratio = (double)SOTTO_SAMPLE_RATE / sc->rate;
	size_t cap = (size_t)(n * ratio) + 256;
	int e;

	if (sc->src == NULL) {
		*ret = sc->mono;
		*ret_n = n;
		return PROTO_OK;
	}
	if (source_client_grow(&sc->out, &sc->cap_out, cap) != 0) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		return PROTO_E_INTERNAL;
	}
	memset(&d, 0, sizeof(d));
	d.data_in = sc->mono;
	d.input_frames = (long)n;
	d.data_out = sc->out;
	d.output_frames = (long)cap;
	d.src_ratio = ratio;
	d.end_of_input = end;
	if ((e = src_process(sc->src, &d)) != 0) {
		snprintf(msg, PROTO_MSG_MAX, "resampler: %s", src_strerror(e));
		return PROTO_E_INTERNAL;
	}
	*ret = sc->out;
	*ret_n = (size_t)d.output_frames_gen;
	return PROTO_OK;
}

enum proto_error
source_client_decode(struct source_client *sc, const uint8_t *p, size_t len,
    const float **ret, size_t *ret_n, char *msg)
{
	long n;

	*ret_n = 0;
	if (sc->format == PROTO_FORMAT_OPUS) {
		if ((n = source_client_opus(sc, p, len, msg)) < 0)
			return PROTO_E_BAD_FRAME;
	} else if ((n = source_client_pcm(sc, p, len)) < 0) {
		snprintf(msg, PROTO_MSG_MAX, "out of memory");
		return PROTO_E_INTERNAL;
	}
	return source_client_resample(sc, (size_t)n, 0, ret, ret_n, msg);
}

enum proto_error
source_client_flush(struct source_client *sc, const float **ret,
    size_t *ret_n, char *msg)
{
	*ret_n = 0;
	if (sc->src == NULL)
		return PROTO_OK;
	return source_client_resample(sc, 0, 1, ret, ret_n, msg);
}
