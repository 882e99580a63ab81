/*
 * Audio file input for the sotto CLI: any file libsndfile reads, as
 * 16 kHz mono float.
 */
#ifndef SOTTO_AUDIO_H
#define SOTTO_AUDIO_H

#include <stddef.h>

#define AUDIO_RATE	16000

/*
 * Read path (wav, flac, ogg/vorbis, opus, mp3 where libsndfile supports
 * it), mix it to mono and resample it to 16 kHz, samples in [-1, 1].
 * Returns 0 with *ret (malloc'd, never NULL, caller frees) holding
 * *ret_n samples, which may be 0 for an empty recording.  Returns -1
 * with a message naming the file in err (errlen bytes, may be NULL) when
 * it is missing, unreadable or not audio.
 */
int	audio_read_file(const char *path, float **ret, size_t *ret_n,
	    char *err, size_t errlen);

#endif
