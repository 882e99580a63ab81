/*
 * Audio file input for the sotto CLI and sottod's uploads: any file
 * libsndfile reads, and what it cannot read through FFmpeg's libraries
 * (audio-private.h), as 16 kHz mono float.
 */
#ifndef SOTTO_AUDIO_H
#define SOTTO_AUDIO_H

#include <stddef.h>

#define AUDIO_RATE	16000

/*
 * An input file decoded as it is read, to 16 kHz mono samples in
 * [-1, 1] (mixed with sotto_pcm_mix(), as sottod's input). A regular
 * file is read again from the start after audio_file_rewind(); a pipe or
 * device keeps its first pass in memory to replay it.
 */
struct audio_file;

/*
 * Open path (wav, flac, ogg/vorbis, opus, mp3 with libsndfile; m4a, mp4,
 * webm, mkv, mpeg and the rest with FFmpeg). Returns 0 with *ret (free
 * with audio_file_close()), or -1 with a message naming the file in err
 * (errlen bytes, may be NULL) when it is missing, unreadable or not
 * audio (then the message lists the formats that work).
 */
int	audio_file_open(const char *path, struct audio_file **ret, char *err,
	    size_t errlen);

/* Raw PCM, with no header to say what it is: little-endian, interleaved. */
struct audio_raw {
	int	float32;		/* f32le; else s16le */
	int	rate, channels;
};

/*
 * audio_file_open() of standard input ("standard input" in messages):
 * any format libsndfile reads from a pipe (WAV, Ogg, MP3: not FLAC, nor
 * FFmpeg's formats, whose start libsndfile has taken), or, with raw
 * (kept, not copied), raw PCM of that layout. Redirected from a regular
 * file it is read twice from where it stood, as a file, in any format; a
 * pipe is held in memory. A terminal is refused.
 */
int	audio_stdin_open(const struct audio_raw *raw, struct audio_file **ret,
	    char *err, size_t errlen);

/*
 * audio_file_open() of a file held in memory: data (len bytes, not
 * copied; it must outlive the audio_file) is decoded with libsndfile's
 * virtual I/O, or FFmpeg's AVIOContext over the same memory (no
 * temporary file), read twice as a regular file is. name (kept, not
 * copied) stands for the file in messages.
 */
int	audio_mem_open(const void *data, size_t len, const char *name,
	    struct audio_file **ret, char *err, size_t errlen);

/*
 * The next samples into buf, at most max: how many, 0 at the end, -1
 * with err. A file that ends early ends here too: audio_file_problem().
 */
long	audio_file_read(struct audio_file *, float *buf, size_t max,
	    char *err, size_t errlen);

/* Start again at the first sample; the samples are the same. */
int	audio_file_rewind(struct audio_file *, char *err, size_t errlen);

/*
 * After the first pass: NULL, or why the file ended before its end (a
 * read error, an Ogg stream cut short, fewer frames than the header
 * gives); the samples before are good.
 */
const char *audio_file_problem(const struct audio_file *);

/* Samples of the first pass that were not numbers (read as 0). */
size_t	audio_file_nonfinite(const struct audio_file *);

void	audio_file_close(struct audio_file *);

/*
 * Read path (any format audio_file_open() reads), mix it to mono and resample it to 16 kHz, samples in [-1, 1].
 * Returns 0 with *ret (malloc'd, never NULL, caller frees) holding
 * *ret_n samples, which may be 0 for an empty recording.  Returns -1
 * with a message naming the file in err (errlen bytes, may be NULL) when
 * it is missing, unreadable, not audio or ends early.
 */
int	audio_read_file(const char *path, float **ret, size_t *ret_n,
	    char *err, size_t errlen);

#endif
