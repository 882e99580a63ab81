/*
 * The decoders behind common/audio.c, seen only by common/: libsndfile
 * (audio-sndfile.c) first, FFmpeg (audio-ffmpeg.c) for what libsndfile
 * cannot read. Each gives interleaved float frames at the file's own rate
 * and channel count; audio.c mixes them to mono (sotto_pcm_mix) and
 * resamples them to 16 kHz, so a file gives the same samples whichever
 * library decoded it.
 */
#ifndef SOTTO_AUDIO_PRIVATE_H
#define SOTTO_AUDIO_PRIVATE_H

#include <sys/types.h>

#include <stddef.h>
#include <stdint.h>

#include "audio.h"

/* A length no header gave. */
#define AUDIO_FRAMES_UNKNOWN	INT64_MAX

/* The formats a file may be in, for the message when none fits. */
#define AUDIO_FORMATS	"wav, flac, ogg (Vorbis, Opus), mp3, m4a/mp4 " \
	"(AAC), webm/mkv (Opus, Vorbis), mpeg"

/*
 * Where an encoded file's bytes are: fd from offset start (a regular file
 * when seekable, else a pipe read from where it stands), or mem[len].
 * The audio_file owns fd and the caller mem; a decoder borrows both and
 * keeps its own copy of this struct.
 */
struct audio_src {
	const char		*name;		/* for messages */
	int			 fd;		/* -1 for mem */
	off_t			 start;
	int			 seekable;
	const unsigned char	*mem;
	size_t			 len;
	const struct audio_raw	*raw;		/* raw PCM (libsndfile only) */
};

/* What a decoder found in the file. */
struct audio_info {
	int		 channels, rate;
	int64_t		 frames;	/* the header's, or AUDIO_FRAMES_UNKNOWN */
};

/*
 * A decoder, as audio.c drives it. read() puts at most max frames
 * (interleaved, channels floats each) into buf: how many, 0 at the end,
 * -1 with the library's reason in err (the file ends there). problem()
 * is called after the end (seconds decoded): NULL, or (into buf) why the
 * file ended before its end, or was damaged, in a way only the decoder
 * knows. close() frees the decoder.
 */
struct audio_dec_ops {
	long		(*read)(void *, float *buf, size_t max, char *err,
			    size_t errlen);
	const char	*(*problem)(void *, double seconds, char *buf,
			    size_t len);
	void		(*close)(void *);
};

/*
 * Open src from its start with either library: 0 with *ret (for ops)
 * and *info, or -1 with the library's reason (not naming the file) in
 * err.
 */
int	audio_sf_open(const struct audio_src *, void **ret,
	    struct audio_info *, char *err, size_t errlen);
extern const struct audio_dec_ops audio_sf_ops;

int	audio_ff_open(const struct audio_src *, void **ret,
	    struct audio_info *, char *err, size_t errlen);
extern const struct audio_dec_ops audio_ff_ops;

#endif
