/*
 * Audio file input, decoded as it is read.
 *
 * libsndfile decodes the file (or FFmpeg, when libsndfile cannot:
 * audio-private.h) in chunks of AUDIO_CHUNK_FRAMES frames;
 * each chunk goes through sotto_pcm_mix() (mono, NaN and infinities as 0,
 * clipped to [-1, 1], as sottod's input) and, unless the file is already
 * at 16 kHz (then it is given unchanged, so s16 input gives exactly
 * whisper's int16 / 32768), through one streaming libsamplerate
 * converter. Nothing grows with the file's length: `sotto transcribe`
 * reads a regular file twice (sotto_transcribe_reader: the first pass
 * finds the log-mel's maximum, the second decodes), reopening it from
 * the start for the second pass. A pipe or a device cannot be read
 * twice: its first pass keeps the 16 kHz samples in memory (64 KB per
 * second, 230 MB per hour) and the second replays them.
 *
 * A file that ends early (a read error, an Ogg stream without its last
 * page, fewer frames than its header gives) is not an error for the
 * reader: what could be read is given, and audio_file_problem() says
 * what happened, so that the caller can transcribe it and still fail.
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
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <samplerate.h>
#include "audio-private.h"
#include "sotto.h"

#define AUDIO_CHUNK_FRAMES	4096
#define AUDIO_SRC_QUALITY	SRC_SINC_MEDIUM_QUALITY
#define AUDIO_SLACK_SAMPLES	256
#define AUDIO_PROBLEM_MAX	256

/*
 * One input file being decoded; see audio.h. Owns everything but path,
 * raw and mem: fd, the decoder, the converter and the buffers.
 */
struct audio_file {
	const char	*path;
	int		 fd;		/* the decoder reads it; we close it */
	off_t		 start;		/* where the audio begins in fd */
	const struct audio_raw *raw;	/* raw PCM's layout, or NULL */
	const unsigned char *mem;	/* or a file in memory (not ours) */
	size_t		 mem_len;
	int		 seekable;	/* a regular file: reopened to rewind */
	int		 keep;		/* not seekable: keep the first pass */
	void		*dec;		/* libsndfile's or FFmpeg's (ops) */
	const struct audio_dec_ops *ops;
	int		 channels;
	int		 rate;
	int64_t		 frames;	/* the header's, AUDIO_FRAMES_UNKNOWN */
	int64_t		 decoded;	/* frames read in this pass */
	int		 pass;		/* 1, then 2 after a rewind */
	int		 in_end;	/* no more frames from the decoder */
	int		 done;		/* every sample of the pass given */
	SRC_STATE	*src;		/* NULL at 16 kHz */
	SRC_DATA	 d;
	float		*chunk;		/* [AUDIO_CHUNK_FRAMES][channels] */
	float		 mono[AUDIO_CHUNK_FRAMES];
	float		*out;		/* converted samples not yet given */
	size_t		 out_pos, out_len, out_cap;
	size_t		 nonfinite;	/* of the first pass */
	char		 problem[AUDIO_PROBLEM_MAX];	/* or "" */
	float		*kept;		/* not seekable: the first pass */
	size_t		 n_kept, cap_kept, replay_pos;
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

/* Decoded seconds so far in this pass, for messages. */
static double
audio_seconds(const struct audio_file *f)
{
	return (double)f->decoded / f->rate;
}

/*
 * The next chunk of frames into f->mono; *ret_got 0 at the end. A read
 * error ends the input (after the frames read before it) and is the
 * file's problem, as in the first pass the second meets it again.
 */
static void
audio_read_mono(struct audio_file *f, size_t *ret_got)
{
	char why[128];
	long got;

	*ret_got = 0;
	if (f->in_end)
		return;
	got = f->ops->read(f->dec, f->chunk, AUDIO_CHUNK_FRAMES, why,
	    sizeof(why));
	if (got < 0) {
		got = 0;
		if (f->problem[0] == '\0')
			snprintf(f->problem, sizeof(f->problem), "read error "
			    "after %.2f s (%s)", audio_seconds(f), why);
	}
	if (got == 0)
		f->in_end = 1;
	f->decoded += got;
	/* the daemon's sanitising: NaN and infinities as 0, clipped */
	if (f->pass == 1)
		f->nonfinite += sotto_pcm_mix(f->chunk, (size_t)got,
		    f->channels, f->mono);
	else
		sotto_pcm_mix(f->chunk, (size_t)got, f->channels, f->mono);
	*ret_got = (size_t)got;
}

/* Converted samples for audio_file_read(), in f->out; sets f->done. */
static int
audio_convert(struct audio_file *f, char *err, size_t errlen)
{
	size_t got;
	int e;

	f->out_pos = f->out_len = 0;
	if (f->src == NULL) {
		audio_read_mono(f, &got);
		memcpy(f->out, f->mono, got * sizeof(float));
		f->out_len = got;
		f->done = got == 0;
		return 0;
	}
	if (f->d.input_frames == 0 && !f->d.end_of_input) {
		audio_read_mono(f, &got);
		f->d.data_in = f->mono;
		f->d.input_frames = (long)got;
		f->d.end_of_input = f->in_end;
	}
	f->d.data_out = f->out;
	f->d.output_frames = (long)f->out_cap;
	if ((e = src_process(f->src, &f->d)) != 0)
		return audio_error(err, errlen, "%s: resampling failed: %s",
		    f->path, src_strerror(e));
	f->out_len = (size_t)f->d.output_frames_gen;
	f->d.data_in += f->d.input_frames_used;
	f->d.input_frames -= f->d.input_frames_used;
	f->done = f->d.end_of_input && f->d.input_frames == 0 &&
	    f->d.output_frames_gen == 0;
	return 0;
}

/*
 * At the end of the first pass: did the file end before its end? The
 * decoder may know (an Ogg stream without its last page, damaged
 * packets); else the header gives a length (MP3's is exact with a Xing
 * header, estimated without, hence the 0.1 s of slack).
 */
static void
audio_check_end(struct audio_file *f)
{
	char why[AUDIO_PROBLEM_MAX];

	if (f->problem[0] != '\0')
		return;
	if (f->ops->problem(f->dec, audio_seconds(f), why, sizeof(why)) !=
	    NULL)
		snprintf(f->problem, sizeof(f->problem), "%s", why);
	else if (f->frames > 0 && f->frames != AUDIO_FRAMES_UNKNOWN &&
	    f->decoded + f->rate / 10 < f->frames)
		snprintf(f->problem, sizeof(f->problem), "it ends after %.2f "
		    "s of the %.2f s its header gives", audio_seconds(f),
		    (double)f->frames / f->rate);
}

/* Keep what the first pass of a pipe gave, for the second. */
static int
audio_keep(struct audio_file *f, const float *x, size_t n, char *err,
    size_t errlen)
{
	size_t cap = f->cap_kept > 0 ? f->cap_kept : 16 * AUDIO_CHUNK_FRAMES;
	float *p;

	while (cap - f->n_kept < n) {
		if (cap > SIZE_MAX / 2 / sizeof(float))
			cap = SIZE_MAX;	/* realloc fails */
		else
			cap *= 2;
	}
	if (cap != f->cap_kept) {
		if (cap == SIZE_MAX || (p = realloc(f->kept,
		    cap * sizeof(*p))) == NULL)
			return audio_error(err, errlen, "%s: out of memory "
			    "after %.0f s (a pipe is held in memory)",
			    f->path, f->n_kept / (double)AUDIO_RATE);
		f->kept = p;
		f->cap_kept = cap;
	}
	memcpy(f->kept + f->n_kept, x, n * sizeof(*x));
	f->n_kept += n;
	return 0;
}

long
audio_file_read(struct audio_file *f, float *buf, size_t max, char *err,
    size_t errlen)
{
	size_t given = 0, k;

	if (f->pass == 2 && f->keep) {
		k = f->n_kept - f->replay_pos;
		k = k < max ? k : max;
		memcpy(buf, f->kept + f->replay_pos, k * sizeof(*buf));
		f->replay_pos += k;
		return (long)k;
	}
	max = max > LONG_MAX ? LONG_MAX : max;
	while (given < max) {
		if (f->out_pos < f->out_len) {
			k = f->out_len - f->out_pos;
			k = k < max - given ? k : max - given;
			memcpy(buf + given, f->out + f->out_pos,
			    k * sizeof(*buf));
			f->out_pos += k;
			given += k;
		} else if (f->done)
			break;
		else if (audio_convert(f, err, errlen) != 0)
			return -1;
	}
	if (f->pass == 1 && f->done && f->out_pos == f->out_len)
		audio_check_end(f);
	if (f->pass == 1 && f->keep && audio_keep(f, buf, given, err,
	    errlen) != 0)
		return -1;
	return (long)given;
}

/* f's bytes, for a decoder to read from their start. */
static struct audio_src
audio_src_of(const struct audio_file *f)
{
	struct audio_src src = { f->path, f->fd, f->start, f->seekable,
	    f->mem, f->mem_len, f->raw };

	return src;
}

/*
 * libsndfile, or FFmpeg where libsndfile cannot read the file, on f from
 * its start; checks the format. FFmpeg needs to read the file from its
 * start: not a pipe, whose first bytes libsndfile has taken, and not raw
 * PCM, which has no header to find.
 */
static int
audio_dec_open(struct audio_file *f, char *err, size_t errlen)
{
	struct audio_src src = audio_src_of(f);
	struct audio_info info;
	char sf_why[128], ff_why[128];

	if (audio_sf_open(&src, &f->dec, &info, sf_why, sizeof(sf_why)) == 0)
		f->ops = &audio_sf_ops;
	else if (f->raw != NULL)
		return audio_error(err, errlen, "%s: %s", f->path, sf_why);
	else if (!f->seekable)
		return audio_error(err, errlen, "%s: not an audio file "
		    "libsndfile reads from a pipe (%s); a pipe may hold wav, "
		    "ogg or mp3: give other formats as a file", f->path,
		    sf_why);
	else if (audio_ff_open(&src, &f->dec, &info, ff_why,
	    sizeof(ff_why)) == 0)
		f->ops = &audio_ff_ops;
	else
		return audio_error(err, errlen, "%s: not an audio file sotto "
		    "reads (%s); formats: " AUDIO_FORMATS, f->path, ff_why);
	if (f->pass > 1 && (info.channels != f->channels ||
	    info.rate != f->rate))
		return audio_error(err, errlen, "%s: changed while it was "
		    "read", f->path);
	if (info.channels <= 0 || info.rate <= 0 ||
	    !src_is_valid_ratio((double)AUDIO_RATE / info.rate))
		return audio_error(err, errlen,
		    "%s: unsupported audio: %d channels at %d Hz", f->path,
		    info.channels, info.rate);
	f->channels = info.channels;
	f->rate = info.rate;
	f->frames = info.frames;
	return 0;
}

/* Buffers and the converter for f's channels and rate. */
static int
audio_alloc(struct audio_file *f, char *err, size_t errlen)
{
	double ratio = (double)AUDIO_RATE / f->rate;
	int e;

	f->out_cap = (size_t)ceil(AUDIO_CHUNK_FRAMES * ratio) +
	    AUDIO_SLACK_SAMPLES;
	f->chunk = calloc(AUDIO_CHUNK_FRAMES, f->channels * sizeof(float));
	f->out = calloc(f->out_cap, sizeof(float));
	if (f->chunk == NULL || f->out == NULL)
		return audio_error(err, errlen, "%s: out of memory", f->path);
	if (f->rate != AUDIO_RATE) {
		if ((f->src = src_new(AUDIO_SRC_QUALITY, 1, &e)) == NULL)
			return audio_error(err, errlen, "%s: cannot resample: "
			    "%s", f->path, src_strerror(e));
		f->d.src_ratio = ratio;
	}
	return 0;
}

/* f->fd open: what kind of file it is, libsndfile on it, buffers. */
static int
audio_fd_open(struct audio_file *f, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(f->fd, &st) == -1)
		return audio_error(err, errlen, "%s: %s", f->path,
		    strerror(errno));
	if (S_ISDIR(st.st_mode))
		return audio_error(err, errlen, "%s: is a directory", f->path);
	f->seekable = S_ISREG(st.st_mode);
	f->keep = !f->seekable;
	if (f->seekable && (f->start = lseek(f->fd, 0, SEEK_CUR)) == -1)
		return audio_error(err, errlen, "%s: %s", f->path,
		    strerror(errno));
	if (f->seekable && st.st_size <= f->start)
		return audio_error(err, errlen, "%s: empty file (0 bytes), not "
		    "an audio file", f->path);
	return audio_dec_open(f, err, errlen) == 0 &&
	    audio_alloc(f, err, errlen) == 0 ? 0 : -1;
}

/* path, or standard input (fd 0, dup'ed: ours to close) for NULL. */
static int
audio_fd_new(const char *path, const struct audio_raw *raw,
    struct audio_file **ret, char *err, size_t errlen)
{
	const char *name = path != NULL ? path : "standard input";
	struct audio_file *f;

	*ret = NULL;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return audio_error(err, errlen, "%s: out of memory", name);
	f->path = name;
	f->raw = raw;
	f->pass = 1;
	f->fd = path != NULL ? open(path, O_RDONLY | O_CLOEXEC) :
	    fcntl(STDIN_FILENO, F_DUPFD_CLOEXEC, 3);
	if (f->fd == -1)
		audio_error(err, errlen, "%s: %s", name, strerror(errno));
	else if (path == NULL && isatty(f->fd))
		audio_error(err, errlen, "standard input is a terminal: pipe "
		    "or redirect audio into it");
	else if (audio_fd_open(f, err, errlen) == 0) {
		*ret = f;
		return 0;
	}
	audio_file_close(f);
	return -1;
}

int
audio_file_open(const char *path, struct audio_file **ret, char *err,
    size_t errlen)
{
	if (path == NULL || *path == '\0') {
		*ret = NULL;
		return audio_error(err, errlen, "no audio file given");
	}
	return audio_fd_new(path, NULL, ret, err, errlen);
}

int
audio_stdin_open(const struct audio_raw *raw, struct audio_file **ret,
    char *err, size_t errlen)
{
	return audio_fd_new(NULL, raw, ret, err, errlen);
}

int
audio_mem_open(const void *data, size_t len, const char *name,
    struct audio_file **ret, char *err, size_t errlen)
{
	struct audio_file *f;

	*ret = NULL;
	if (len == 0)
		return audio_error(err, errlen, "%s: empty file (0 bytes), "
		    "not an audio file", name);
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return audio_error(err, errlen, "%s: out of memory", name);
	f->path = name;
	f->pass = 1;
	f->fd = -1;
	f->mem = data;
	f->mem_len = len;
	f->seekable = 1;
	if (audio_dec_open(f, err, errlen) != 0 ||
	    audio_alloc(f, err, errlen) != 0) {
		audio_file_close(f);
		return -1;
	}
	*ret = f;
	return 0;
}

int
audio_file_rewind(struct audio_file *f, char *err, size_t errlen)
{
	f->pass = 2;
	f->replay_pos = 0;
	if (f->keep)
		return 0;
	if (!f->seekable)
		return audio_error(err, errlen, "%s: cannot be read twice",
		    f->path);
	f->ops->close(f->dec);
	f->dec = NULL;
	if (audio_dec_open(f, err, errlen) != 0)
		return -1;
	if (f->src != NULL)
		src_reset(f->src);
	memset(&f->d, 0, sizeof(f->d));
	f->d.src_ratio = (double)AUDIO_RATE / f->rate;
	f->decoded = 0;
	f->in_end = f->done = 0;
	f->out_pos = f->out_len = 0;
	return 0;
}

const char *
audio_file_problem(const struct audio_file *f)
{
	return f->problem[0] != '\0' ? f->problem : NULL;
}

size_t
audio_file_nonfinite(const struct audio_file *f)
{
	return f->nonfinite;
}

void
audio_file_close(struct audio_file *f)
{
	if (f == NULL)
		return;
	if (f->dec != NULL)
		f->ops->close(f->dec);
	if (f->fd >= 0)
		close(f->fd);
	if (f->src != NULL)
		src_delete(f->src);
	free(f->chunk);
	free(f->out);
	free(f->kept);
	free(f);
}

/* Append what f gives to a growing array; -1 with err. */
static int
audio_read_all(struct audio_file *f, float **data, size_t *n, char *err,
    size_t errlen)
{
	size_t cap = 0;
	long got;
	float *p;

	do {
		if (cap - *n < AUDIO_CHUNK_FRAMES) {
			cap = cap > 0 ? cap * 2 : 16 * AUDIO_CHUNK_FRAMES;
			if (cap > SIZE_MAX / 2 / sizeof(float) ||
			    (p = realloc(*data, cap * sizeof(*p))) == NULL)
				return audio_error(err, errlen, "%s: out of "
				    "memory after %zu samples", f->path, *n);
			*data = p;
		}
		if ((got = audio_file_read(f, *data + *n, cap - *n, err,
		    errlen)) < 0)
			return -1;
		*n += (size_t)got;
	} while (got > 0);
	return 0;
}

int
audio_read_file(const char *path, float **ret, size_t *ret_n, char *err,
    size_t errlen)
{
	struct audio_file *f;
	float *data = NULL, *p;
	size_t n = 0;
	int rc = -1;

	*ret = NULL;
	*ret_n = 0;
	if (audio_file_open(path, &f, err, errlen) != 0)
		return -1;
	f->keep = 0;		/* read once: nothing to keep */
	if (audio_read_all(f, &data, &n, err, errlen) == 0) {
		if (audio_file_problem(f) != NULL)
			audio_error(err, errlen, "%s: %s", path,
			    audio_file_problem(f));
		else
			rc = 0;
	}
	audio_file_close(f);
	if (rc != 0) {
		free(data);
		return -1;
	}
	/* give back the slack; keep the old block if that fails */
	if ((p = realloc(data, (n > 0 ? n : 1) * sizeof(*p))) != NULL)
		data = p;
	*ret = data;
	*ret_n = n;
	return 0;
}
