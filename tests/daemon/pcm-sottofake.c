/*
 * sottofake: an ALSA external PCM plugin (ioplug) that is a capture device
 * for the tests of sottod's microphone, daemon/sources/source-alsa.c.  It plays a
 * raw file of speech as a live microphone, paced by the clock, and fails
 * on a schedule the way real devices fail: an overrun (xrun: readi gives
 * -EPIPE), and unplugging (the running PCM becomes DISCONNECTED, readi
 * gives -ENODEV, and opening it fails with -ENODEV until it comes back).
 *
 *	pcm_type.sottofake { lib "/path/libasound_module_pcm_sottofake.so" }
 *	pcm.mic {
 *		type sottofake
 *		file "/path/speech.raw"	# s16le, mono, 16 kHz
 *		origin "/path/origin"	# the device's time 0 (see below)
 *		xrun_ms "4000,9000"	# overruns at these device times
 *		unplug_ms 12000		# unplugged at this device time
 *		away_ms 3000		# for this long
 *		channels 1		# the file's samples on every channel
 *	}
 *
 * Device time is the same for every open of the device: the first open
 * writes the CLOCK_MONOTONIC nanoseconds to the origin file, later opens
 * (after an unplug, or by another process) read it.  Like a microphone,
 * the device's audio goes on whether or not anyone reads it: device time
 * t plays file sample t * 16 (silence after the end of the file), so
 * what is not captured (during an xrun's recovery, while unplugged) is
 * lost.  A reader that falls a whole buffer behind gets a real overrun.
 *
 * The poll descriptor is a timerfd that fires once per period.
 */
#include <sys/timerfd.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>

#define FAKE_RATE	16000
#define FAKE_XRUNS_MAX	16

struct fake {
	snd_pcm_ioplug_t	 io;
	int16_t			*pcm;		/* the file, owned */
	size_t			 frames;
	unsigned		 channels;
	int64_t			 origin_ns;
	int64_t			 xrun_ms[FAKE_XRUNS_MAX];
	int			 n_xruns;
	int64_t			 unplug_ms;	/* -1: never */
	int64_t			 away_ms;
	int			 timer;		/* timerfd, owned */
	int64_t			 start_ns;	/* when started */
	uint64_t		 hw;		/* frames captured since start */
	uint64_t		 read;		/* frames transferred */
};

static int64_t
fake_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t
fake_ms(const struct fake *f, int64_t ns)
{
	return (ns - f->origin_ns) / 1000000;
}

/* Is the device away (unplugged) at device time t_ms? */
static int
fake_away(const struct fake *f, int64_t t_ms)
{
	return f->unplug_ms >= 0 && t_ms >= f->unplug_ms &&
	    t_ms < f->unplug_ms + f->away_ms;
}

static int
fake_start(snd_pcm_ioplug_t *io)
{
	struct fake *f = io->private_data;
	struct itimerspec its;
	int64_t period_ns;

	f->start_ns = fake_now_ns();
	f->hw = f->read = 0;
	period_ns = (int64_t)io->period_size * 1000000000 / FAKE_RATE;
	memset(&its, 0, sizeof(its));
	its.it_value.tv_sec = period_ns / 1000000000;
	its.it_value.tv_nsec = period_ns % 1000000000;
	its.it_interval = its.it_value;
	return timerfd_settime(f->timer, 0, &its, NULL) == 0 ? 0 : -errno;
}

static int
fake_stop(snd_pcm_ioplug_t *io)
{
	struct fake *f = io->private_data;
	struct itimerspec its;

	memset(&its, 0, sizeof(its));
	timerfd_settime(f->timer, 0, &its, NULL);
	return 0;
}

/* Has an overrun from the schedule come since this start? */
static int
fake_xrun_due(const struct fake *f, int64_t now_ns)
{
	int64_t started = fake_ms(f, f->start_ns), t = fake_ms(f, now_ns);
	int i;

	for (i = 0; i < f->n_xruns; i++)
		if (f->xrun_ms[i] > started && f->xrun_ms[i] <= t)
			return 1;
	return 0;
}

static snd_pcm_sframes_t
fake_pointer(snd_pcm_ioplug_t *io)
{
	struct fake *f = io->private_data;
	int64_t now = fake_now_ns();

	if (f->unplug_ms >= 0 && fake_ms(f, now) >= f->unplug_ms &&
	    fake_ms(f, f->start_ns) < f->unplug_ms + f->away_ms) {
		snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
		return (snd_pcm_sframes_t)(f->hw % io->buffer_size);
	}
	if (fake_xrun_due(f, now))
		return -EPIPE;
	f->hw = (uint64_t)(now - f->start_ns) * FAKE_RATE / 1000000000;
	if (f->hw - f->read >= io->buffer_size)
		return -EPIPE;		/* a real overrun: nobody read */
	return (snd_pcm_sframes_t)(f->hw % io->buffer_size);
}

/* Capture: the device's frames from where the last transfer ended. */
static snd_pcm_sframes_t
fake_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
    snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
	struct fake *f = io->private_data;
	uint64_t first = (uint64_t)(f->start_ns - f->origin_ns) * FAKE_RATE /
	    1000000000 + f->read;
	snd_pcm_uframes_t i;
	unsigned c;
	int16_t v;

	for (i = 0; i < size; i++) {
		v = first + i < f->frames ? f->pcm[first + i] : 0;
		for (c = 0; c < io->channels; c++)
			*(int16_t *)((char *)areas[c].addr + (areas[c].first +
			    areas[c].step * (offset + i)) / 8) = v;
	}
	f->read += size;
	return (snd_pcm_sframes_t)size;
}

/* Acknowledge the timer; readable means "a period went by". */
static int
fake_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd,
    unsigned int nfds, unsigned short *revents)
{
	struct fake *f = io->private_data;
	uint64_t ticks;

	*revents = 0;
	if (nfds >= 1 && (pfd[0].revents & POLLIN)) {
		if (read(f->timer, &ticks, sizeof(ticks)) < 0 &&
		    errno != EAGAIN)
			return -errno;
		*revents = POLLIN;
	}
	return 0;
}

static int
fake_close(snd_pcm_ioplug_t *io)
{
	struct fake *f = io->private_data;

	close(f->timer);
	free(f->pcm);
	free(f);
	return 0;
}

static const snd_pcm_ioplug_callback_t fake_callbacks = {
	.start = fake_start,
	.stop = fake_stop,
	.pointer = fake_pointer,
	.transfer = fake_transfer,
	.poll_revents = fake_poll_revents,
	.close = fake_close,
};

static int
fake_load(struct fake *f, const char *path)
{
	FILE *fp;
	long len;

	if ((fp = fopen(path, "rb")) == NULL) {
		SNDERR("sottofake: %s: %s", path, strerror(errno));
		return -ENOENT;
	}
	if (fseek(fp, 0, SEEK_END) != 0 || (len = ftell(fp)) < 0 ||
	    fseek(fp, 0, SEEK_SET) != 0) {
		fclose(fp);
		return -EIO;
	}
	f->frames = (size_t)len / sizeof(int16_t);
	if ((f->pcm = malloc(f->frames * sizeof(int16_t) + 1)) == NULL) {
		fclose(fp);
		return -ENOMEM;
	}
	if (fread(f->pcm, sizeof(int16_t), f->frames, fp) != f->frames) {
		fclose(fp);
		return -EIO;
	}
	fclose(fp);
	return 0;
}

/* The device's time 0: from the origin file, or now (and written there). */
static int
fake_origin(struct fake *f, const char *path)
{
	char buf[32];
	ssize_t n;
	int fd;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		if (n <= 0)
			return -EIO;
		buf[n] = '\0';
		f->origin_ns = strtoll(buf, NULL, 10);
		return 0;
	}
	f->origin_ns = fake_now_ns();
	if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
	    0644)) < 0)
		return -errno;
	n = snprintf(buf, sizeof(buf), "%lld\n", (long long)f->origin_ns);
	if (write(fd, buf, (size_t)n) != n) {
		close(fd);
		return -EIO;
	}
	return close(fd) == 0 ? 0 : -errno;
}

static int
fake_parse_xruns(struct fake *f, const char *s)
{
	char *end;

	while (*s != '\0' && f->n_xruns < FAKE_XRUNS_MAX) {
		f->xrun_ms[f->n_xruns++] = strtoll(s, &end, 10);
		if (end == s)
			return -EINVAL;
		s = *end == ',' ? end + 1 : end;
	}
	return *s == '\0' ? 0 : -EINVAL;
}

/* Read the PCM's fields; file and origin are required. */
static int
fake_config(struct fake *f, snd_config_t *conf, const char **file,
    const char **origin)
{
	snd_config_iterator_t i, next;
	const char *id, *xruns = NULL;
	long v;

	f->unplug_ms = -1;
	f->channels = 1;
	snd_config_for_each(i, next, conf) {
		snd_config_t *n = snd_config_iterator_entry(i);

		if (snd_config_get_id(n, &id) < 0)
			continue;
		if (strcmp(id, "comment") == 0 || strcmp(id, "type") == 0 ||
		    strcmp(id, "hint") == 0)
			continue;
		if (strcmp(id, "file") == 0 && snd_config_get_string(n,
		    file) == 0)
			continue;
		if (strcmp(id, "origin") == 0 && snd_config_get_string(n,
		    origin) == 0)
			continue;
		if (strcmp(id, "xrun_ms") == 0 && snd_config_get_string(n,
		    &xruns) == 0)
			continue;
		if (snd_config_get_integer(n, &v) == 0) {
			if (strcmp(id, "unplug_ms") == 0)
				f->unplug_ms = v;
			else if (strcmp(id, "away_ms") == 0)
				f->away_ms = v;
			else if (strcmp(id, "channels") == 0 && v >= 1 &&
			    v <= 8)
				f->channels = (unsigned)v;
			else
				goto bad;
			continue;
		}
bad:
		SNDERR("sottofake: bad field %s", id);
		return -EINVAL;
	}
	if (*file == NULL || *origin == NULL) {
		SNDERR("sottofake: file and origin are required");
		return -EINVAL;
	}
	return xruns != NULL ? fake_parse_xruns(f, xruns) : 0;
}

static int
fake_constraints(struct fake *f)
{
	static const unsigned access[] = { SND_PCM_ACCESS_RW_INTERLEAVED };
	static const unsigned format[] = { SND_PCM_FORMAT_S16_LE };
	snd_pcm_ioplug_t *io = &f->io;
	unsigned frame = 2 * f->channels;
	int r;

	if ((r = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_ACCESS,
	    1, access)) < 0 ||
	    (r = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_FORMAT,
	    1, format)) < 0 ||
	    (r = snd_pcm_ioplug_set_param_minmax(io,
	    SND_PCM_IOPLUG_HW_CHANNELS, f->channels, f->channels)) < 0 ||
	    (r = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_RATE,
	    FAKE_RATE, FAKE_RATE)) < 0 ||
	    (r = snd_pcm_ioplug_set_param_minmax(io,
	    SND_PCM_IOPLUG_HW_PERIOD_BYTES, 16 * frame, FAKE_RATE * frame)) <
	    0 ||
	    (r = snd_pcm_ioplug_set_param_minmax(io,
	    SND_PCM_IOPLUG_HW_BUFFER_BYTES, 64 * frame, 4 * FAKE_RATE *
	    frame)) < 0)
		return r;
	return snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIODS,
	    2, 1024);
}

static int
fake_open(struct fake *f, const char *name, snd_config_t *conf,
    snd_pcm_stream_t stream, int mode)
{
	const char *file = NULL, *origin = NULL;
	int r;

	if (stream != SND_PCM_STREAM_CAPTURE)
		return -EINVAL;
	if ((r = fake_config(f, conf, &file, &origin)) < 0 ||
	    (r = fake_origin(f, origin)) < 0)
		return r;
	if (fake_away(f, fake_ms(f, fake_now_ns())))
		return -ENODEV;
	if ((r = fake_load(f, file)) < 0)
		return r;
	f->timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (f->timer < 0)
		return -errno;
	f->io.version = SND_PCM_IOPLUG_VERSION;
	f->io.name = "sotto test microphone";
	f->io.callback = &fake_callbacks;
	f->io.private_data = f;
	f->io.poll_fd = f->timer;
	f->io.poll_events = POLLIN;
	if ((r = snd_pcm_ioplug_create(&f->io, name, stream, mode)) < 0) {
		close(f->timer);
		return r;
	}
	return 0;
}

int	SND_PCM_PLUGIN_ENTRY(sottofake)(snd_pcm_t **, const char *,
	    snd_config_t *, snd_config_t *, snd_pcm_stream_t, int);

SND_PCM_PLUGIN_DEFINE_FUNC(sottofake)
{
	struct fake *f;
	int r;

	(void)root;
	if ((f = calloc(1, sizeof(*f))) == NULL)
		return -ENOMEM;
	f->timer = -1;
	if ((r = fake_open(f, name, conf, stream, mode)) < 0) {
		free(f->pcm);
		free(f);
		return r;
	}
	if ((r = fake_constraints(f)) < 0) {
		snd_pcm_ioplug_delete(&f->io);	/* fake_close frees f */
		return r;
	}
	*pcmp = f->io.pcm;
	return 0;
}

SND_PCM_PLUGIN_SYMBOL(sottofake);
