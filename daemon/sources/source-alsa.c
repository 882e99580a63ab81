/*
 * ALSA capture.  The PCM is opened non-blocking; the event loop polls the
 * descriptors from source_alsa_pollfds and calls source_alsa_read, which
 * first lets the plugin translate and acknowledge its poll events
 * (snd_pcm_poll_descriptors_revents: ioplug and dsnoop need it, or their fds
 * stay readable), then reads until the device has nothing more.
 *
 * Every error from the PCM goes through source_alsa_recover, after
 * PipeWire's alsa_recover: an overrun is counted and the stream prepared and
 * started again; a suspended stream is resumed (or prepared if it cannot
 * be); a disconnected device is reported to the caller, which closes it and
 * tries to open it again later.  Resuming never sleeps: while the device is
 * still waking up, the next read tries again.
 *
 * A read never asks for more than one buffer of frames, which the file
 * plugin (used by the tests) requires.  That plugin with a null slave is not
 * paced: it delivers the whole input file as fast as it is read.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <alsa/asoundlib.h>

#include "log.h"
#include "source-alsa.h"

#define SOURCE_ALSA_PERIOD_US	100000	/* 100 ms */
#define SOURCE_ALSA_BUFFER_US	1000000	/* 1 s of slack for a busy loop */

struct source_alsa {
	snd_pcm_t		*pcm;		/* owned */
	char			 device[128];
	unsigned		 rate;
	unsigned		 channels;
	snd_pcm_uframes_t	 buffer_frames;
	snd_pcm_uframes_t	 period_frames;
	unsigned long		 xruns;
	int			 npfds;
	struct pollfd		 pfds[SOURCE_ALSA_MAX_POLLFDS];
};

/* ALSA prints its own diagnostics to stderr; send them to debug logging,
 * since every failure is reported again with context by this file. */
static void
source_alsa_lib_error(const char *file, int line, const char *function,
    int err, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!log_getdebug())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_debug("alsa: %s:%d (%s): %s%s%s", file, line, function, msg,
	    err != 0 ? ": " : "", err != 0 ? snd_strerror(err) : "");
}

static int
source_alsa_fail(struct source_alsa *src, int r, const char *what,
    char *err, size_t errlen)
{
	snprintf(err, errlen, "ALSA device \"%s\": %s: %s", src->device, what,
	    snd_strerror(r));
	return -1;
}

/* Access, format, channels and rate must be exactly what was asked. */
static int
source_alsa_hw_params(struct source_alsa *src, char *err, size_t errlen)
{
	snd_pcm_hw_params_t *hw;
	unsigned us;
	int r, dir = 0;

	snd_pcm_hw_params_alloca(&hw);
	if ((r = snd_pcm_hw_params_any(src->pcm, hw)) < 0)
		return source_alsa_fail(src, r, "no configurations", err,
		    errlen);
	if ((r = snd_pcm_hw_params_set_access(src->pcm, hw,
	    SND_PCM_ACCESS_RW_INTERLEAVED)) < 0)
		return source_alsa_fail(src, r, "interleaved access", err,
		    errlen);
	if ((r = snd_pcm_hw_params_set_format(src->pcm, hw,
	    SND_PCM_FORMAT_S16_LE)) < 0)
		return source_alsa_fail(src, r, "cannot capture S16_LE (use a "
		    "plug device such as \"default\" or \"plughw:N\")", err,
		    errlen);
	if ((r = snd_pcm_hw_params_set_channels(src->pcm, hw,
	    src->channels)) < 0) {
		snprintf(err, errlen, "ALSA device \"%s\" cannot capture %u "
		    "channel(s); set [mic] channels or use a plug device",
		    src->device, src->channels);
		return -1;
	}
	snd_pcm_hw_params_set_rate_resample(src->pcm, hw, 1);
	if ((r = snd_pcm_hw_params_set_rate(src->pcm, hw, src->rate, 0)) < 0) {
		snprintf(err, errlen, "ALSA device \"%s\" cannot capture at "
		    "%u Hz; set [mic] rate or use a plug device", src->device,
		    src->rate);
		return -1;
	}
	us = SOURCE_ALSA_PERIOD_US;
	snd_pcm_hw_params_set_period_time_near(src->pcm, hw, &us, &dir);
	us = SOURCE_ALSA_BUFFER_US;
	snd_pcm_hw_params_set_buffer_time_near(src->pcm, hw, &us, &dir);
	if ((r = snd_pcm_hw_params(src->pcm, hw)) < 0)
		return source_alsa_fail(src, r, "hardware parameters", err,
		    errlen);
	snd_pcm_hw_params_get_buffer_size(hw, &src->buffer_frames);
	snd_pcm_hw_params_get_period_size(hw, &src->period_frames, &dir);
	if (src->buffer_frames == 0)
		return source_alsa_fail(src, -EINVAL, "empty buffer", err,
		    errlen);
	return 0;
}

/* Wake up once a period is ready. */
static int
source_alsa_sw_params(struct source_alsa *src, char *err, size_t errlen)
{
	snd_pcm_sw_params_t *sw;
	int r;

	snd_pcm_sw_params_alloca(&sw);
	if ((r = snd_pcm_sw_params_current(src->pcm, sw)) < 0 ||
	    (r = snd_pcm_sw_params_set_avail_min(src->pcm, sw,
	    src->period_frames > 0 ? src->period_frames : 1)) < 0 ||
	    (r = snd_pcm_sw_params(src->pcm, sw)) < 0)
		return source_alsa_fail(src, r, "software parameters", err,
		    errlen);
	return 0;
}

static int
source_alsa_setup(struct source_alsa *src, char *err, size_t errlen)
{
	int r;

	if (source_alsa_hw_params(src, err, errlen) == -1 ||
	    source_alsa_sw_params(src, err, errlen) == -1)
		return -1;
	r = snd_pcm_poll_descriptors_count(src->pcm);
	if (r <= 0 || r > SOURCE_ALSA_MAX_POLLFDS)
		return source_alsa_fail(src, r <= 0 ? r : -E2BIG,
		    "poll descriptors", err, errlen);
	src->npfds = snd_pcm_poll_descriptors(src->pcm, src->pfds, r);
	if (src->npfds <= 0)
		return source_alsa_fail(src, src->npfds < 0 ? src->npfds :
		    -EINVAL, "poll descriptors", err, errlen);
	if ((r = snd_pcm_start(src->pcm)) < 0)
		return source_alsa_fail(src, r, "cannot start capture", err,
		    errlen);
	return 0;
}

int
source_alsa_open(const char *device, unsigned rate, unsigned channels,
    struct source_alsa **ret, char *err, size_t errlen)
{
	struct source_alsa *src;
	int r;

	*ret = NULL;
	if (rate == 0 || channels == 0) {
		snprintf(err, errlen, "ALSA device \"%s\": bad format: %u Hz, "
		    "%u channel(s)", device, rate, channels);
		return -1;
	}
	snd_lib_error_set_handler(source_alsa_lib_error);
	if ((src = calloc(1, sizeof(*src))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(src->device, sizeof(src->device), "%s", device);
	src->rate = rate;
	src->channels = channels;
	r = snd_pcm_open(&src->pcm, device, SND_PCM_STREAM_CAPTURE,
	    SND_PCM_NONBLOCK);
	if (r < 0) {
		snprintf(err, errlen, "ALSA device \"%s\": cannot open for "
		    "capture: %s%s", device, snd_strerror(r), r == -ENOENT ?
		    " (arecord -L lists the devices)" : "");
		free(src);
		return -1;
	}
	if (source_alsa_setup(src, err, errlen) == -1) {
		source_alsa_close(src);
		return -1;
	}
	*ret = src;
	return 0;
}

void
source_alsa_close(struct source_alsa *src)
{
	if (src == NULL)
		return;
	if (src->pcm != NULL) {
		snd_pcm_drop(src->pcm);
		snd_pcm_close(src->pcm);
	}
	free(src);
}

int
source_alsa_pollfds_count(struct source_alsa *src)
{
	return src->npfds;
}

int
source_alsa_pollfds(struct source_alsa *src, struct pollfd *fds, int n)
{
	if (n > src->npfds)
		n = src->npfds;
	memcpy(fds, src->pfds, (size_t)n * sizeof(*fds));
	return n;
}

/*
 * Bring the stream back to RUNNING after error res from the PCM.  Returns
 * 0 when it runs again or will on a later read (device still resuming),
 * -1 with a message when the device is gone or cannot be restarted.
 */
static int
source_alsa_recover(struct source_alsa *src, int res, char *err,
    size_t errlen)
{
	snd_pcm_state_t state = snd_pcm_state(src->pcm);
	int r;

	if (state == SND_PCM_STATE_DISCONNECTED || res == -ENODEV) {
		snprintf(err, errlen, "ALSA device \"%s\" disconnected",
		    src->device);
		return -1;
	}
	if (state == SND_PCM_STATE_SUSPENDED || res == -ESTRPIPE) {
		r = snd_pcm_resume(src->pcm);
		if (r == 0 || r == -EAGAIN)
			return 0;
		/* Cannot resume (-ENOSYS): prepare as after an xrun. */
	} else if (state == SND_PCM_STATE_XRUN || res == -EPIPE)
		src->xruns++;
	if ((r = snd_pcm_prepare(src->pcm)) < 0)
		return source_alsa_fail(src, r, "cannot recover", err, errlen);
	if ((r = snd_pcm_start(src->pcm)) < 0)
		return source_alsa_fail(src, r, "cannot restart", err, errlen);
	return 0;
}

/* Let the plugin demangle and acknowledge its poll events. */
static void
source_alsa_revents(struct source_alsa *src)
{
	struct pollfd pfds[SOURCE_ALSA_MAX_POLLFDS];
	unsigned short revents;

	memcpy(pfds, src->pfds, (size_t)src->npfds * sizeof(*pfds));
	if (poll(pfds, (nfds_t)src->npfds, 0) <= 0)
		return;
	snd_pcm_poll_descriptors_revents(src->pcm, pfds,
	    (unsigned)src->npfds, &revents);
}

/* A stream left PREPARED (or worse) by a resume is started again. */
static int
source_alsa_check_state(struct source_alsa *src, char *err, size_t errlen)
{
	switch (snd_pcm_state(src->pcm)) {
	case SND_PCM_STATE_RUNNING:
		return 0;
	case SND_PCM_STATE_PREPARED:
		if (snd_pcm_start(src->pcm) == 0)
			return 0;
		return source_alsa_recover(src, -EPIPE, err, errlen);
	case SND_PCM_STATE_XRUN:
		return source_alsa_recover(src, -EPIPE, err, errlen);
	case SND_PCM_STATE_SUSPENDED:
		return source_alsa_recover(src, -ESTRPIPE, err, errlen);
	case SND_PCM_STATE_DISCONNECTED:
		return source_alsa_recover(src, -ENODEV, err, errlen);
	default:
		return source_alsa_recover(src, -EBADFD, err, errlen);
	}
}

long
source_alsa_read(struct source_alsa *src, int16_t *buf,
    unsigned long max_frames, char *err, size_t errlen)
{
	snd_pcm_uframes_t want;
	snd_pcm_sframes_t n;
	unsigned long got = 0;

	source_alsa_revents(src);
	if (source_alsa_check_state(src, err, errlen) == -1)
		return -1;
	while (got < max_frames) {
		want = max_frames - got;
		if (want > src->buffer_frames)
			want = src->buffer_frames;
		n = snd_pcm_readi(src->pcm, buf + got * src->channels, want);
		if (n == -EAGAIN || n == 0)
			break;
		if (n < 0) {
			/* Restarted: new data comes with the next poll. */
			if (source_alsa_recover(src, (int)n, err, errlen) == -1)
				return -1;
			break;
		}
		got += (unsigned long)n;
		if ((snd_pcm_uframes_t)n < want)
			break;
	}
	return (long)got;
}

unsigned long
source_alsa_xruns(const struct source_alsa *src)
{
	return src->xruns;
}

unsigned
source_alsa_rate(const struct source_alsa *src)
{
	return src->rate;
}

unsigned
source_alsa_channels(const struct source_alsa *src)
{
	return src->channels;
}
