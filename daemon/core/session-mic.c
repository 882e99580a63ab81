/*
 * The microphone: ALSA capture (source-alsa.c) feeding the shared session
 * "mic", whose events go to every SUBSCRIBE {"source":"mic"} client.
 *
 * The PCM's poll fds are libevent events on the loop. A PCM whose fds
 * epoll refuses (a plain file, as ALSA's file plugin over a null slave
 * gives) is read from a timer instead, paced at its nominal rate the way
 * a sound card would deliver it. An overrun (xrun: the loop did not read
 * in time, so the device overwrote audio) is recovered by source-alsa.c
 * and logged here. When the device fails (unplugged, or cannot be opened
 * at all) it is closed and opened again every SESSION_MIC_RETRY_S
 * seconds; the session and its subscribers stay, they just get no audio
 * meanwhile.
 */
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core-private.h"
#include "log.h"
#include "session.h"
#include "source-alsa.h"

#define SESSION_MIC_RETRY_S	2
#define SESSION_MIC_CHUNK	4096	/* frames per read */
#define SESSION_MIC_TICK_MS	20	/* timer mode: read interval */

static struct {
	struct session		*session;
	struct source_alsa	*alsa;
	struct event		*ev[SOURCE_ALSA_MAX_POLLFDS];
	int			 n_ev;
	struct event		*retry;
	struct event		*tick;		/* timer mode */
	double			 t_open;	/* timer mode: pacing */
	uint64_t		 frames;
	int			 warned;	/* open failure logged */
	unsigned long		 xruns;		/* logged, since open */
	int16_t			*buf;
} mic;

static void	session_mic_read_cb(int, short, void *);

struct session *
session_mic(void)
{
	return mic.session;
}

int
session_mic_state(void)
{
	if (mic.session == NULL)
		return -1;
	return mic.alsa != NULL;
}

static void
session_mic_unwatch(void)
{
	int i;

	for (i = 0; i < mic.n_ev; i++)
		event_free(mic.ev[i]);
	mic.n_ev = 0;
}

static void
session_mic_close(void)
{
	session_mic_unwatch();
	if (mic.tick != NULL)
		event_free(mic.tick);
	mic.tick = NULL;
	source_alsa_close(mic.alsa);
	mic.alsa = NULL;
}

static void
session_mic_retry(void)
{
	struct timeval tv = { SESSION_MIC_RETRY_S, 0 };

	if (!core.draining)
		evtimer_add(mic.retry, &tv);
}

/* Read from a timer, for fds epoll cannot watch. */
static int
session_mic_timer(void)
{
	struct timeval tv = { 0, SESSION_MIC_TICK_MS * 1000 };

	session_mic_unwatch();
	mic.tick = event_new(core.base, -1, EV_PERSIST, session_mic_read_cb,
	    NULL);
	if (mic.tick == NULL || event_add(mic.tick, &tv) != 0)
		return -1;
	mic.t_open = core_now();
	mic.frames = 0;
	log_info("mic: %s cannot be polled; reading it every %d ms at %d Hz",
	    core.cfg.mic_device, SESSION_MIC_TICK_MS, core.cfg.mic_rate);
	return 0;
}

/* Watch the PCM's poll fds; 0, or -1 when epoll refuses one. */
static int
session_mic_watch(void)
{
	struct pollfd pfd[SOURCE_ALSA_MAX_POLLFDS];
	short what;
	int i, n;

	n = source_alsa_pollfds(mic.alsa, pfd, SOURCE_ALSA_MAX_POLLFDS);
	for (i = 0; i < n; i++) {
		what = EV_PERSIST;
		if (pfd[i].events & POLLIN)
			what |= EV_READ;
		if (pfd[i].events & POLLOUT)
			what |= EV_WRITE;
		mic.ev[mic.n_ev] = event_new(core.base, pfd[i].fd, what,
		    session_mic_read_cb, NULL);
		if (mic.ev[mic.n_ev] == NULL)
			return -1;
		mic.n_ev++;
		if (event_add(mic.ev[mic.n_ev - 1], NULL) != 0)
			return -1;
	}
	return 0;
}

/* Open the device and watch it; 0 or -1 (retry later). */
static int
session_mic_open(void)
{
	char err[256];

	if (source_alsa_open(core.cfg.mic_device, core.cfg.mic_rate,
	    core.cfg.mic_channels, &mic.alsa, err, sizeof(err)) != 0) {
		if (!mic.warned)
			log_warnx("mic: %s; retrying every %d s", err,
			    SESSION_MIC_RETRY_S);
		mic.warned = 1;
		return -1;
	}
	if (session_mic_watch() != 0 && session_mic_timer() != 0) {
		log_warnx("mic: cannot watch the device");
		session_mic_close();
		return -1;
	}
	log_info("mic: capturing from %s (%d Hz, %d channels)%s",
	    core.cfg.mic_device, core.cfg.mic_rate,
	    core.cfg.mic_channels, mic.warned ? " again" : "");
	mic.warned = 0;
	mic.xruns = 0;
	return 0;
}

static void
session_mic_retry_cb(int fd, short ev, void *arg)
{
	if (session_mic_open() != 0)
		session_mic_retry();
}

/* Frames to read now: all there are, or in timer mode what is due. */
static unsigned long
session_mic_budget(void)
{
	double due;

	if (mic.tick == NULL)
		return SESSION_MIC_CHUNK;
	due = (core_now() - mic.t_open) * core.cfg.mic_rate -
	    (double)mic.frames;
	if (due < 1)
		return 0;
	return due < SESSION_MIC_CHUNK ? (unsigned long)due : SESSION_MIC_CHUNK;
}

static void
session_mic_read_cb(int fd, short ev, void *arg)
{
	unsigned long want;
	char err[256];
	long n;
	int i;

	for (i = 0; i < 64 && mic.alsa != NULL; i++) {
		if ((want = session_mic_budget()) == 0)
			return;
		n = source_alsa_read(mic.alsa, mic.buf, want, err,
		    sizeof(err));
		if (n < 0) {
			log_warnx("mic: %s; reopening every %d s", err,
			    SESSION_MIC_RETRY_S);
			mic.warned = 1;
			session_mic_close();
			session_mic_retry();
			return;
		}
		if (source_alsa_xruns(mic.alsa) != mic.xruns) {
			core_totals.mic_xruns += source_alsa_xruns(mic.alsa) -
			    mic.xruns;
			mic.xruns = source_alsa_xruns(mic.alsa);
			log_warnx("mic: overrun (xrun) on %s: capture "
			    "restarted, some audio lost (%lu since opened)",
			    core.cfg.mic_device, mic.xruns);
		}
		if (n == 0)
			return;
		mic.frames += (uint64_t)n;
		session_shared_audio(mic.session, mic.buf, (size_t)n);
	}
}

/* With [mic] enabled: the shared session, and capture (now or later). */
int
session_mic_start(char *err, size_t errlen)
{
	if (!core.cfg.mic_enabled)
		return 0;
	mic.buf = malloc((size_t)SESSION_MIC_CHUNK * core.cfg.mic_channels *
	    sizeof(*mic.buf));
	mic.retry = evtimer_new(core.base, session_mic_retry_cb, NULL);
	mic.session = session_shared_new("mic", core.cfg.mic_rate,
	    core.cfg.mic_channels, core.cfg.mic_language,
	    core.cfg.mic_diarize);
	if (mic.buf == NULL || mic.retry == NULL || mic.session == NULL) {
		snprintf(err, errlen, "mic: cannot set up the session");
		return -1;
	}
	if (session_mic_open() != 0)
		session_mic_retry();
	return 0;
}

/* Stop capturing (drain or exit); the session itself ends elsewhere. */
void
session_mic_stop(void)
{
	session_mic_close();
	if (mic.retry != NULL)
		evtimer_del(mic.retry);
}
