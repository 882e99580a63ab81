/*
 * libFuzzer target for sottod's audio ingestion: the audio of a stream
 * (daemon/sources/source-client.c): client PCM (s16le, f32le) at any
 * rate and channel count OPEN accepts, and Opus packets, turned into
 * 16 kHz mono samples through sotto_pcm_mix(), libsamplerate and libopus;
 * and an uploaded file (common/audio.c: libsndfile, else FFmpeg).
 *
 * Input: a first byte below 0x80 is a stream: [format][rate: 3
 * bytes][channels] then AUDIO payloads, each a 2-byte little-endian
 * length and its bytes (cut where the input ends), then the end of the
 * stream (the converter is flushed). From 0x80 on, the rest of the input
 * is a file in memory, read twice as sottod reads an upload
 * (audio_mem_open), FUZZ_FILE_SAMPLES at most a pass so that a few bytes
 * claiming hours of audio do not time out; both passes must give as
 * many samples. Every sample out must be a number and bounded:
 * sotto_pcm_mix() clips to [-1, 1] before the resampler, whose overshoot
 * is at most the L1 norm of its filter (about 3 for SRC_SINC_FASTEST); 8
 * leaves room.
 */
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "audio.h"
#include "source-client.h"

int	LLVMFuzzerTestOneInput(const uint8_t *, size_t);

#define FUZZ_SAMPLE_MAX	8.0f
#define FUZZ_FILE_SAMPLES	(AUDIO_RATE * 120)
#define FUZZ_FILE_CHUNK	4096

static const int fuzz_rates[] = { 16000, 8000, 11025, 22050, 44100, 48000,
    96000, 192000 };

static void
fuzz_check(const float *x, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		if (!isfinite(x[i]) || fabsf(x[i]) > FUZZ_SAMPLE_MAX) {
			fprintf(stderr, "sample %zu of %zu is %g\n", i, n,
			    x[i]);
			abort();
		}
	}
}

/* The stream's format as OPEN would give it, from 5 bytes. */
static void
fuzz_open_params(const uint8_t *p, enum proto_format *format, int *rate,
    int *channels)
{
	uint32_t v = p[1] | p[2] << 8 | (uint32_t)p[3] << 16;

	*format = (enum proto_format)(p[0] % 5);
	*rate = v < 8 ? fuzz_rates[v] : PROTO_RATE_MIN + (int)(v %
	    (PROTO_RATE_MAX - PROTO_RATE_MIN + 1));
	*channels = 1 + p[4] % (*format == PROTO_FORMAT_OPUS ? 2 :
	    PROTO_CHANNELS_MAX);
}

/* One pass over f: how many samples, each checked; -1 on an error. */
static long
fuzz_file_pass(struct audio_file *f)
{
	static float buf[FUZZ_FILE_CHUNK];
	char err[256];
	long got, n = 0;

	while (n < FUZZ_FILE_SAMPLES && (got = audio_file_read(f, buf,
	    FUZZ_FILE_CHUNK, err, sizeof(err))) != 0) {
		if (got < 0)
			return -1;
		fuzz_check(buf, (size_t)got);
		n += got;
	}
	return n;
}

static void
fuzz_file(const uint8_t *data, size_t size)
{
	struct audio_file *f;
	char err[256] = "";
	long n1, n2;

	if (audio_mem_open(data, size, "upload", &f, err, sizeof(err)) != 0) {
		if (err[0] == '\0')
			abort();	/* a refusal says why */
		return;
	}
	n1 = fuzz_file_pass(f);
	if (n1 >= 0 && audio_file_rewind(f, err, sizeof(err)) == 0) {
		n2 = fuzz_file_pass(f);
		if (n1 < FUZZ_FILE_SAMPLES && n2 != n1) {
			fprintf(stderr, "pass 1 gave %ld samples, pass 2 %ld\n",
			    n1, n2);
			abort();
		}
	}
	audio_file_close(f);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct source_client *sc;
	enum proto_format format;
	char msg[PROTO_MSG_MAX];
	const float *out;
	size_t len, n;
	int rate, channels;

	if (size >= 1 && data[0] >= 0x80) {
		fuzz_file(data + 1, size - 1);
		return 0;
	}
	if (size < 5)
		return 0;
	fuzz_open_params(data, &format, &rate, &channels);
	data += 5;
	size -= 5;
	if ((sc = source_client_new(format, rate, channels, msg)) == NULL)
		abort();		/* OPEN accepts these */
	while (size >= 2) {
		len = data[0] | (size_t)data[1] << 8;
		data += 2;
		size -= 2;
		len = len < size ? len : size;
		/* a bad frame ends the session in sottod; here too */
		if (source_client_decode(sc, data, len, &out, &n, msg) !=
		    PROTO_OK)
			break;
		fuzz_check(out, n);
		data += len;
		size -= len;
	}
	if (source_client_flush(sc, &out, &n, msg) == PROTO_OK)
		fuzz_check(out, n);
	source_client_free(sc);
	return 0;
}
