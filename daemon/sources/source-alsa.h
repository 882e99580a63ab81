/*
 * ALSA capture for the shared microphone session: a non-blocking PCM whose
 * poll fds the caller watches in its event loop.
 */
#ifndef SOTTOD_SOURCE_ALSA_H
#define SOTTOD_SOURCE_ALSA_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define SOURCE_ALSA_MAX_POLLFDS	8

struct source_alsa;

/*
 * Open device (an ALSA PCM name: "default", "hw:1,0", "plughw:1"...) for
 * capture of interleaved signed 16-bit samples at exactly rate and channels,
 * and start it.  Returns 0 and *ret, or -1 with a message in err.
 */
int	source_alsa_open(const char *device, unsigned rate, unsigned channels,
	    struct source_alsa **ret, char *err, size_t errlen);
/* Stop and free; NULL is allowed. */
void	source_alsa_close(struct source_alsa *);

/* Number of poll fds (at most SOURCE_ALSA_MAX_POLLFDS). */
int	source_alsa_pollfds_count(struct source_alsa *);
/*
 * Fill up to n poll fds (snd_pcm_poll_descriptors); returns the count.
 * Watch each fd for its .events (usually POLLIN; some plugins ask for
 * POLLOUT even when capturing) and call source_alsa_read when one fires.
 */
int	source_alsa_pollfds(struct source_alsa *, struct pollfd *fds, int n);

/*
 * Read the frames available now, at most max_frames, into buf
 * (max_frames * channels samples).  Returns the number of frames (0: none
 * yet), or -1 with a message in err when the device is gone or cannot be
 * restarted: close it and open it again later.  Overruns and suspends are
 * recovered here and counted in source_alsa_xruns.
 */
long	source_alsa_read(struct source_alsa *, int16_t *buf,
	    unsigned long max_frames, char *err, size_t errlen);

/* Overruns recovered since open. */
unsigned long	source_alsa_xruns(const struct source_alsa *);
/* The rate and channel count in use (as asked for at open). */
unsigned	source_alsa_rate(const struct source_alsa *);
unsigned	source_alsa_channels(const struct source_alsa *);

#endif /* SOTTOD_SOURCE_ALSA_H */
