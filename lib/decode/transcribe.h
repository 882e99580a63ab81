/*
 * Shared between transcribe.c (the seek loop) and segments.c (cutting a
 * window's tokens into timed segments and keeping the prompt history).
 */
#ifndef SOTTO_TRANSCRIBE_H
#define SOTTO_TRANSCRIBE_H

#include <stddef.h>
#include <stdint.h>

#include "decode.h"
#include "mel.h"
#include "model.h"

/*
 * The samples a run reads (transcribe-audio.c): samples [off, off + len)
 * of the n, at pcm. From an array, pcm is the caller's whole signal;
 * from a reader, pcm is buf (owned, cap samples), refilled as the seek
 * moves forward, never back.
 */
struct run_audio {
	const struct sotto_reader *reader;	/* borrowed; NULL: an array */
	const float	*pcm;
	size_t		 off;
	size_t		 len;
	size_t		 n;
	float		*buf;
	size_t		 cap;
};

/* One sotto_transcribe() call. Owns tokens; res until it is returned. */
struct run {
	const struct sotto_model *model;		/* borrowed */
	const struct sotto_transcribe_params *params;	/* borrowed */
	struct run_audio audio;
	size_t n;		/* samples in all (audio.n after pass 1) */
	size_t content;		/* mel frames of real audio */
	size_t seek;		/* current window start, in frames */
	float mel_max;
	const float *temperatures;
	int n_temperatures;
	uint64_t rng;
	int language;		/* index, or -1 for English-only models */
	float language_prob;
	int32_t *tokens;	/* all_tokens: every kept segment's tokens */
	int n_tokens, cap_tokens;
	int prompt_from;	/* prompt_reset_since */
	double last_speech;	/* end of the last word (word timestamps) */
	struct sotto_result *res;
};

/* transcribe-audio.c */
void	audio_init_array(struct run_audio *, const float *pcm, size_t n);
int	audio_init_reader(struct run_audio *, const struct sotto_reader *,
	    char *err);
void	audio_free(struct run_audio *);
int	audio_global_max(struct sotto_state *, struct run_audio *,
	    float *ret_max, char *err);
int	audio_rewind(struct run_audio *, char *err);
int	audio_hold(struct run_audio *, size_t from, size_t to, char *err);
void	audio_span(const struct run_audio *, struct mel_span *);

/* segments.c */
int	segments_add(struct sotto_state *, struct run *,
	    const struct decode_result *, size_t window_frames, char *err);
int	prompt_init(struct run *, const char *text, char *err);
int	result_set_language(struct run *, char *err);
/*
 * Keep a segment and its words inside [0, limit] seconds, the audio's end
 * (a timestamp token can name a time past the last sample); also for the
 * VAD pass (transcribe-vad.c) and the stream (stream-commit.c).
 */
void	segment_clamp(struct sotto_segment *, double limit);

/*
 * transcribe-vad.c: the VAD pass, also diarize.c's: the reader's audio
 * (read to its end, then rewound) into *ret, a malloc'd probability per
 * SOTTO_VAD_CHUNK (*ret_np, faster-whisper's padding included), and its
 * length in *ret_n.
 */
int	transcribe_vad_probs(const struct sotto_vad *, const struct sotto_reader *,
	    float **ret, size_t *ret_np, size_t *ret_n, char *err);

#endif
