/*
 * Log-mel front end: Whisper's STFT, mel filter bank and log10.
 *
 * ref: whisper/audio.py log_mel_spectrogram()
 */
#ifndef SOTTO_MEL_H
#define SOTTO_MEL_H

#include <stddef.h>

#define MEL_N_FFT	400
#define MEL_N_BINS	(MEL_N_FFT / 2 + 1)	/* 201 */
#define MEL_HOP		160
#define MEL_LOG_FLOOR	(-10.0f)		/* log10(1e-10) */

/* FFT plan, window, filter bands and scratch; one per state, not shared. */
struct mel;

/*
 * Make a front end for n_mels filters [n_mels][201]; the filters are
 * borrowed and must outlive the mel.  Returns 0 and sets *ret, or a
 * negative SOTTO_E* code.
 */
int	mel_new(int n_mels, const float *filters, struct mel **ret,
	    char *err);
void	mel_free(struct mel *);

/* STFT frames of n samples followed by pad zeros: (n + pad) / 160. */
size_t	mel_total_frames(size_t n, size_t pad);

/*
 * Log10 mel power of frames [first, first + n_frames) of pcm[0..n)
 * followed by pad zero samples, as torch.stft(center=True, reflect) on
 * the padded signal with the last frame dropped.  Not normalised.
 * out is [n_mels][n_frames] with row stride ld >= n_frames.  *ret_max
 * (may be NULL) gets the largest value written, MEL_LOG_FLOOR if none.
 * Frames are computed from pcm directly, so extra memory is constant.
 *
 * Signals shorter than 201 samples cannot be reflected by 200 (torch
 * refuses them); here a reflected index that falls outside the padded
 * signal reads as zero.
 */
int	mel_log(struct mel *, const float *pcm, size_t n, size_t pad,
	    size_t first, size_t n_frames, float *out, size_t ld,
	    float *ret_max, char *err);

/*
 * A stretch of a signal held in memory: pcm[0..len) are samples
 * [off, off + len) of a signal of n samples followed by pad zeros.
 */
struct mel_span {
	const float	*pcm;
	size_t		 off;
	size_t		 len;
	size_t		 n;
	size_t		 pad;
};

/*
 * mel_log() of frames of a span's signal: the same values as mel_log()
 * on the whole signal, for frames whose samples (reflections included)
 * the span holds (SOTTO_EINVAL otherwise). A reader that cannot hold a
 * whole file computes its frames a stretch at a time.
 */
int	mel_log_span(struct mel *, const struct mel_span *, size_t first,
	    size_t n_frames, float *out, size_t ld, float *ret_max,
	    char *err);

/* Whisper's normalisation in place: x = (max(x, max_value - 8) + 4) / 4. */
void	mel_normalize(float *mel, size_t rows, size_t cols, size_t ld,
	    float max_value);

#endif
