/*
 * libsndfile, the first decoder common/audio.c tries (audio-private.h):
 * a descriptor from its position, or a file in memory through
 * libsndfile's virtual I/O.
 */
#include <sys/types.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sndfile.h>

#include "audio-private.h"

/* libsndfile on one file: owns sf, borrows src's descriptor or memory. */
struct audio_sf {
	struct audio_src src;
	sf_count_t	 pos;		/* in src.mem */
	SNDFILE		*sf;
	int		 channels;
	int		 format;	/* SF_FORMAT_* of the container */
	int		 failed;	/* a read error, given at the next read */
	char		 why[128];
};

static sf_count_t
audio_sf_mem_length(void *user)
{
	return (sf_count_t)((struct audio_sf *)user)->src.len;
}

static sf_count_t
audio_sf_mem_seek(sf_count_t offset, int whence, void *user)
{
	struct audio_sf *s = user;
	sf_count_t len = (sf_count_t)s->src.len;
	sf_count_t at = whence == SEEK_SET ? 0 : whence == SEEK_CUR ?
	    s->pos : len;

	if (offset < -at || offset > len - at)
		return -1;
	s->pos = at + offset;
	return s->pos;
}

static sf_count_t
audio_sf_mem_read(void *ptr, sf_count_t count, void *user)
{
	struct audio_sf *s = user;
	sf_count_t n = (sf_count_t)s->src.len - s->pos;

	if (count < n)
		n = count < 0 ? 0 : count;
	memcpy(ptr, s->src.mem + s->pos, (size_t)n);
	s->pos += n;
	return n;
}

static sf_count_t
audio_sf_mem_write(const void *ptr, sf_count_t count, void *user)
{
	return 0;
}

static sf_count_t
audio_sf_mem_tell(void *user)
{
	return ((struct audio_sf *)user)->pos;
}

static SNDFILE *
audio_sf_open_mem(struct audio_sf *s, SF_INFO *info)
{
	static SF_VIRTUAL_IO vio = {
		audio_sf_mem_length, audio_sf_mem_seek, audio_sf_mem_read,
		audio_sf_mem_write, audio_sf_mem_tell,
	};

	s->pos = 0;
	return sf_open_virtual(&vio, SFM_READ, info, s);
}

/*
 * libsndfile on a copy of fd, which it closes: when it cannot read the
 * file it closes the descriptor it was given even when told not to, and
 * FFmpeg reads the file next.
 */
static SNDFILE *
audio_sf_open_fd(int fd, SF_INFO *info)
{
	SNDFILE *sf;
	int copy;

	if ((copy = fcntl(fd, F_DUPFD_CLOEXEC, 3)) == -1)
		return NULL;
	if ((sf = sf_open_fd(copy, SFM_READ, info, SF_TRUE)) == NULL &&
	    fcntl(copy, F_GETFD) != -1)
		close(copy);
	return sf;
}

static void
audio_sf_close(void *p)
{
	struct audio_sf *s = p;

	if (s == NULL)
		return;
	if (s->sf != NULL)
		sf_close(s->sf);
	free(s);
}

int
audio_sf_open(const struct audio_src *src, void **ret,
    struct audio_info *ai, char *err, size_t errlen)
{
	struct audio_sf *s;
	SF_INFO info;

	*ret = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	s->src = *src;
	memset(&info, 0, sizeof(info));
	if (src->raw != NULL) {
		info.format = SF_FORMAT_RAW | SF_ENDIAN_LITTLE |
		    (src->raw->float32 ? SF_FORMAT_FLOAT : SF_FORMAT_PCM_16);
		info.samplerate = src->raw->rate;
		info.channels = src->raw->channels;
	}
	/* libsndfile takes the descriptor's position as the file's start */
	if (src->mem == NULL && src->seekable && lseek(src->fd, src->start,
	    SEEK_SET) == -1) {
		snprintf(err, errlen, "%s", strerror(errno));
		audio_sf_close(s);
		return -1;
	}
	s->sf = src->mem != NULL ? audio_sf_open_mem(s, &info) :
	    audio_sf_open_fd(src->fd, &info);
	if (s->sf == NULL) {
		/* "Format not recognised.": its period ends no sentence here */
		snprintf(err, errlen, "%.*s", (int)strcspn(sf_strerror(NULL),
		    "."), sf_strerror(NULL));
		audio_sf_close(s);
		return -1;
	}
	s->channels = info.channels;
	s->format = info.format;
	ai->channels = info.channels;
	ai->rate = info.samplerate;
	/* raw PCM from a pipe has no length; libsndfile makes one up */
	ai->frames = (src->raw != NULL && !src->seekable) ||
	    info.frames == SF_COUNT_MAX ? AUDIO_FRAMES_UNKNOWN :
	    (int64_t)info.frames;
	*ret = s;
	return 0;
}

/* A read error ends the file after the frames read before it. */
static long
audio_sf_read(void *p, float *buf, size_t max, char *err, size_t errlen)
{
	struct audio_sf *s = p;
	sf_count_t got;

	if (s->failed) {
		snprintf(err, errlen, "%s", s->why);
		return -1;
	}
	got = sf_readf_float(s->sf, buf, (sf_count_t)max);
	if (got < 0)
		got = 0;
	if ((size_t)got < max && sf_error(s->sf) != SF_ERR_NO_ERROR) {
		s->failed = 1;
		snprintf(s->why, sizeof(s->why), "%s", sf_strerror(s->sf));
		if (got == 0)
			return audio_sf_read(p, buf, max, err, errlen);
	}
	return (long)got;
}

/* Ogg (Vorbis, Opus) says it was cut short only in libsndfile's log. */
static const char *
audio_sf_problem(void *p, double seconds, char *buf, size_t len)
{
	struct audio_sf *s = p;
	char log[2048];

	if ((s->format & SF_FORMAT_TYPEMASK) != SF_FORMAT_OGG)
		return NULL;
	sf_command(s->sf, SFC_GET_LOG_INFO, log, sizeof(log));
	if (strstr(log, "ended unexpectedly") == NULL)
		return NULL;
	snprintf(buf, len, "the Ogg stream ends after %.2f s without its "
	    "last page", seconds);
	return buf;
}

const struct audio_dec_ops audio_sf_ops = {
	audio_sf_read, audio_sf_problem, audio_sf_close,
};
