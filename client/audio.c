/*
 * Audio file input.
 *
 * libsndfile decodes the file in chunks of AUDIO_CHUNK_FRAMES frames;
 * each chunk is averaged down to mono and, unless the file is already at
 * 16 kHz (then it is copied unchanged, so s16 input gives exactly
 * whisper's int16 / 32768), fed to one streaming libsamplerate converter.
 * The only buffer that grows is the output, so memory is the output size
 * plus a few chunks however long the file.
 *
 * The converter is SRC_SINC_MEDIUM_QUALITY: its pass band reaches 90% of
 * Nyquist (7.2 kHz at 16 kHz), so only the top few of Whisper's mel bands
 * (which end at 8 kHz, where speech has little energy) see any roll-off,
 * and it runs about 60 times faster than real time on one core where
 * SRC_SINC_BEST_QUALITY (96% pass band) is ~3 times slower, which would
 * add minutes to a two-hour recording.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <samplerate.h>
#include <sndfile.h>

#include "audio.h"
#include "sotto.h"

#define AUDIO_CHUNK_FRAMES	4096
#define AUDIO_SRC_QUALITY	SRC_SINC_MEDIUM_QUALITY
#define AUDIO_GUESS_MAX_SAMPLES	((size_t)AUDIO_RATE * 3600)
#define AUDIO_SLACK_SAMPLES	256

/* An open input file and its chunk buffers. */
struct audio_in {
	const char	*path;
	SNDFILE		*sf;
	int		 channels;
	int		 rate;
	sf_count_t	 frames;	/* from the header; a guess */
	float		*chunk;	/* [AUDIO_CHUNK_FRAMES][channels] */
	float		 mono[AUDIO_CHUNK_FRAMES];
};

/* The growing output: n samples of cap. */
struct audio_out {
	float		*data;
	size_t		 n;
	size_t		 cap;
};

static int	audio_error(char *, size_t, const char *, ...)
		    __attribute__((format(printf, 3, 4)));

static int
audio_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Make room for extra more samples in out. */
static int
audio_reserve(struct audio_out *out, size_t extra)
{
	size_t cap;
	float *p;

	if (out->cap - out->n >= extra)
		return 0;
	cap = out->cap > 0 ? out->cap : AUDIO_CHUNK_FRAMES;
	while (cap - out->n < extra) {
		if (cap > SIZE_MAX / 2 / sizeof(float))
			return -1;
		cap *= 2;
	}
	if ((p = realloc(out->data, cap * sizeof(*p))) == NULL)
		return -1;
	out->data = p;
	out->cap = cap;
	return 0;
}

/* First allocation: the header's length converted to 16 kHz, if sane. */
static int
audio_reserve_guess(struct audio_out *out, const struct audio_in *in)
{
	double guess = 0.0;

	if (in->frames > 0)
		guess = (double)in->frames * AUDIO_RATE / in->rate;
	if (guess > (double)AUDIO_GUESS_MAX_SAMPLES)
		guess = (double)AUDIO_GUESS_MAX_SAMPLES;
	return audio_reserve(out, (size_t)guess + AUDIO_SLACK_SAMPLES);
}

/*
 * Read the next chunk into in->mono; *ret_got is 0 at the end of the
 * file.
 */
static int
audio_read_mono(struct audio_in *in, size_t *ret_got, char *err,
    size_t errlen)
{
	sf_count_t got;

	*ret_got = 0;
	got = sf_readf_float(in->sf, in->chunk, AUDIO_CHUNK_FRAMES);
	if (got < AUDIO_CHUNK_FRAMES && sf_error(in->sf) != SF_ERR_NO_ERROR)
		return audio_error(err, errlen, "%s: read error: %s", in->path,
		    sf_strerror(in->sf));
	if (got < 0)
		got = 0;
	/* the daemon's sanitising: NaN and infinities as 0, clipped */
	sotto_pcm_mix(in->chunk, (size_t)got, in->channels, in->mono);
	*ret_got = (size_t)got;
	return 0;
}

/* A file already at 16 kHz: copy its samples unchanged. */
static int
audio_copy(struct audio_in *in, struct audio_out *out, char *err,
    size_t errlen)
{
	size_t got;

	do {
		if (audio_read_mono(in, &got, err, errlen) == -1)
			return -1;
		if (audio_reserve(out, got) == -1)
			return audio_error(err, errlen,
			    "%s: out of memory after %zu samples", in->path,
			    out->n);
		memcpy(out->data + out->n, in->mono, got * sizeof(float));
		out->n += got;
	} while (got > 0);
	return 0;
}

/* One src_process() call, appending to out; advances d past its input. */
static int
audio_convert(struct audio_in *in, SRC_STATE *src, SRC_DATA *d,
    struct audio_out *out, char *err, size_t errlen)
{
	size_t room;
	int e;

	room = (size_t)ceil(d->input_frames * d->src_ratio) +
	    AUDIO_SLACK_SAMPLES;
	if (audio_reserve(out, room) == -1)
		return audio_error(err, errlen,
		    "%s: out of memory after %zu samples", in->path, out->n);
	d->data_out = out->data + out->n;
	d->output_frames = (long)(out->cap - out->n > LONG_MAX ? LONG_MAX :
	    out->cap - out->n);
	if ((e = src_process(src, d)) != 0)
		return audio_error(err, errlen, "%s: resampling failed: %s",
		    in->path, src_strerror(e));
	out->n += (size_t)d->output_frames_gen;
	d->data_in += d->input_frames_used;
	d->input_frames -= d->input_frames_used;
	return 0;
}

/* Stream the file through a converter to 16 kHz. */
static int
audio_resample(struct audio_in *in, struct audio_out *out, char *err,
    size_t errlen)
{
	SRC_STATE *src;
	SRC_DATA d;
	size_t got;
	int e, rc = 0;

	if ((src = src_new(AUDIO_SRC_QUALITY, 1, &e)) == NULL)
		return audio_error(err, errlen, "%s: cannot resample: %s",
		    in->path, src_strerror(e));
	memset(&d, 0, sizeof(d));
	d.src_ratio = (double)AUDIO_RATE / in->rate;
	for (;;) {
		if (d.input_frames == 0 && !d.end_of_input) {
			if ((rc = audio_read_mono(in, &got, err, errlen)) != 0)
				break;
			d.data_in = in->mono;
			d.input_frames = (long)got;
			d.end_of_input = got == 0;
		}
		if ((rc = audio_convert(in, src, &d, out, err, errlen)) != 0)
			break;
		if (d.end_of_input && d.output_frames_gen == 0)
			break;
	}
	src_delete(src);
	return rc;
}

/* Open path and check its format; fills in. */
static int
audio_open(struct audio_in *in, const char *path, char *err, size_t errlen)
{
	struct stat st;
	SF_INFO info;

	memset(in, 0, sizeof(*in));
	in->path = path;
	if (stat(path, &st) == -1)
		return audio_error(err, errlen, "%s: %s", path,
		    strerror(errno));
	if (S_ISDIR(st.st_mode))
		return audio_error(err, errlen, "%s: is a directory", path);
	if (st.st_size == 0)
		return audio_error(err, errlen,
		    "%s: empty file (0 bytes), not an audio file", path);
	memset(&info, 0, sizeof(info));
	if ((in->sf = sf_open(path, SFM_READ, &info)) == NULL)
		return audio_error(err, errlen,
		    "%s: not an audio file libsndfile can read: %s", path,
		    sf_strerror(NULL));
	if (info.channels <= 0 || info.samplerate <= 0 ||
	    !src_is_valid_ratio((double)AUDIO_RATE / info.samplerate))
		return audio_error(err, errlen,
		    "%s: unsupported audio: %d channels at %d Hz", path,
		    info.channels, info.samplerate);
	in->channels = info.channels;
	in->rate = info.samplerate;
	in->frames = info.frames;
	in->chunk = calloc(AUDIO_CHUNK_FRAMES, in->channels * sizeof(float));
	if (in->chunk == NULL)
		return audio_error(err, errlen, "%s: out of memory", path);
	return 0;
}

static void
audio_close(struct audio_in *in)
{
	if (in->sf != NULL)
		sf_close(in->sf);
	free(in->chunk);
}

int
audio_read_file(const char *path, float **ret, size_t *ret_n, char *err,
    size_t errlen)
{
	struct audio_in in;
	struct audio_out out = { NULL, 0, 0 };
	float *p;
	int rc;

	*ret = NULL;
	*ret_n = 0;
	if (path == NULL || *path == '\0')
		return audio_error(err, errlen, "no audio file given");
	if ((rc = audio_open(&in, path, err, errlen)) == 0) {
		if (audio_reserve_guess(&out, &in) == -1)
			rc = audio_error(err, errlen, "%s: out of memory",
			    path);
		else if (in.rate == AUDIO_RATE)
			rc = audio_copy(&in, &out, err, errlen);
		else
			rc = audio_resample(&in, &out, err, errlen);
	}
	audio_close(&in);
	if (rc != 0) {
		free(out.data);
		return -1;
	}
	/* give back the slack; keep the old block if that fails */
	if ((p = realloc(out.data, (out.n > 0 ? out.n : 1) *
	    sizeof(*p))) != NULL)
		out.data = p;
	*ret = out.data;
	*ret_n = out.n;
	return 0;
}
