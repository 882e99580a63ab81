/*
 * Log-mel front end.
 *
 * ref: whisper/audio.py log_mel_spectrogram()
 *
 * Whisper runs torch.stft(n_fft 400, hop 160, periodic Hann, center=True)
 * over the whole (zero-padded) signal.  centre=True reflect-pads 200
 * samples at both ends, so frame t covers padded samples
 * [160 t - 200, 160 t + 200).  Instead of building that padded copy, each
 * frame is gathered straight from pcm: interior frames are one multiply
 * by the window, and only the frames that touch either end go through
 * mel_sample(), which applies the reflection and the trailing zeros.  A
 * call therefore needs O(n_mels + n_fft) memory however long the signal.
 *
 * The filter bank is sparse (each mel row covers at most ~14 of the 201
 * bins), so mel_new() records the non-zero band of every row once.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include <kiss_fftr.h>
#include <omp.h>

#include "err.h"
#include "mel.h"

#define MEL_N_MELS_MAX	1024
#define MEL_POWER_MIN	1e-10f
/* Frames in one call before the threads share them (a window is 3000). */
#define MEL_PAR_FRAMES	256
/* log10(x) = ln(x) log10(e) */
#define MEL_LOG10_E	0.43429448190325182765f

/* The non-zero bins [lo, hi) of one filter row. */
struct mel_band {
	int		 lo;
	int		 hi;
};

/* One thread's plan and scratch: the windowed frame, its spectrum, |X|^2. */
struct mel_scratch {
	kiss_fftr_cfg	 fft;		/* owned; kiss_fftr writes into it */
	float		 frame[MEL_N_FFT];
	kiss_fft_cpx	 spec[MEL_N_BINS];
	float		 power[MEL_N_BINS];
};

struct mel {
	int		 n_mels;
	const float	*filters;	/* [n_mels][201], borrowed */
	float		 window[MEL_N_FFT];
	int		 n_scratch;	/* threads that can share a call */
	struct mel_scratch *scratch;	/* [n_scratch], owned */
	struct mel_band	 band[];	/* [n_mels] */
};

/* ref: torch.hann_window(400), periodic: 0.5 - 0.5 cos(2 pi n / 400) */
static void
mel_init_window(float *w)
{
	int i;

	for (i = 0; i < MEL_N_FFT; i++)
		w[i] = (float)(0.5 - 0.5 * cos(2.0 * M_PI * i / MEL_N_FFT));
}

/* Find the non-zero bins of each filter row. */
static void
mel_init_bands(struct mel *m)
{
	const float *row;
	int r, k;

	for (r = 0; r < m->n_mels; r++) {
		row = m->filters + (size_t)r * MEL_N_BINS;
		m->band[r].lo = 0;
		m->band[r].hi = 0;
		for (k = 0; k < MEL_N_BINS; k++) {
			if (row[k] == 0.0f)
				continue;
			if (m->band[r].hi == 0)
				m->band[r].lo = k;
			m->band[r].hi = k + 1;
		}
	}
}

int
mel_new(int n_mels, const float *filters, struct mel **ret, char *err)
{
	struct mel *m;
	int i;

	*ret = NULL;
	if (n_mels <= 0 || n_mels > MEL_N_MELS_MAX || filters == NULL)
		return err_set(err, SOTTO_EINVAL,
		    "mel: need 1 to %d mel filters, got %d%s", MEL_N_MELS_MAX,
		    n_mels, filters == NULL ? " and no filter bank" : "");
	m = calloc(1, sizeof(*m) + (size_t)n_mels * sizeof(m->band[0]));
	if (m == NULL)
		return err_set(err, SOTTO_ENOMEM, "mel: out of memory");
	m->n_scratch = omp_get_max_threads();
	m->scratch = calloc(m->n_scratch, sizeof(*m->scratch));
	for (i = 0; m->scratch != NULL && i < m->n_scratch; i++)
		if ((m->scratch[i].fft = kiss_fftr_alloc(MEL_N_FFT, 0, NULL,
		    NULL)) == NULL)
			break;
	if (m->scratch == NULL || i < m->n_scratch) {
		mel_free(m);
		return err_set(err, SOTTO_ENOMEM,
		    "mel: out of memory for the FFT plans");
	}
	m->n_mels = n_mels;
	m->filters = filters;
	mel_init_window(m->window);
	mel_init_bands(m);
	*ret = m;
	return 0;
}

void
mel_free(struct mel *m)
{
	int i;

	if (m == NULL)
		return;
	for (i = 0; m->scratch != NULL && i < m->n_scratch; i++)
		kiss_fftr_free(m->scratch[i].fft);
	free(m->scratch);
	free(m);
}

size_t
mel_total_frames(size_t n, size_t pad)
{
	if (n > SIZE_MAX - pad)
		return 0;
	/* 1 + len / 160 frames from torch.stft, minus the dropped last one */
	return (n + pad) / MEL_HOP;
}

/*
 * Sample i of the reflect-padded signal: the n samples, then zeros up to
 * len, mirrored about samples 0 and len - 1 (edges not repeated).
 * Reflections that land outside [0, len) - possible only when len < 201 -
 * read zero. The span holds every sample read (mel_log_span checks).
 */
static float
mel_sample(const struct mel_span *sp, size_t len, ptrdiff_t i)
{
	if (i < 0)
		i = -i;
	else if ((size_t)i >= len)
		i = 2 * ((ptrdiff_t)len - 1) - i;
	if (i < 0 || (size_t)i >= sp->n)
		return 0.0f;
	return sp->pcm[(size_t)i - sp->off];
}

/* Windowed frame t into s->frame. */
static void
mel_gather(const struct mel *m, struct mel_scratch *s,
    const struct mel_span *sp, size_t len, size_t t)
{
	ptrdiff_t start = (ptrdiff_t)(t * MEL_HOP) - MEL_N_FFT / 2;
	const float *x;
	int i;

	if (start >= 0 && (size_t)start + MEL_N_FFT <= sp->n) {
		x = sp->pcm + ((size_t)start - sp->off);
		for (i = 0; i < MEL_N_FFT; i++)
			s->frame[i] = x[i] * m->window[i];
		return;
	}
	for (i = 0; i < MEL_N_FFT; i++)
		s->frame[i] = mel_sample(sp, len, start + i) * m->window[i];
}

/*
 * Log mel of the frame in s->frame into column out[0], out[ld], ...
 * Returns the largest value.
 * ref: stft.abs() ** 2; filters @ magnitudes; clamp(min=1e-10).log10()
 */
static float
mel_column(const struct mel *m, struct mel_scratch *s, float *out, size_t ld)
{
	const float *row;
	float sum, v, max = MEL_LOG_FLOOR;
	int r, k;

	kiss_fftr(s->fft, s->frame, s->spec);
	for (k = 0; k < MEL_N_BINS; k++)
		s->power[k] = s->spec[k].r * s->spec[k].r +
		    s->spec[k].i * s->spec[k].i;
	for (r = 0; r < m->n_mels; r++) {
		row = m->filters + (size_t)r * MEL_N_BINS;
		sum = 0.0f;
		for (k = m->band[r].lo; k < m->band[r].hi; k++)
			sum += row[k] * s->power[k];
		if (!(sum > MEL_POWER_MIN))
			sum = MEL_POWER_MIN;
		v = logf(sum) * MEL_LOG10_E;
		out[(size_t)r * ld] = v;
		if (v > max)
			max = v;
	}
	return max;
}

/*
 * Whether the span holds the samples frames [first, last] read: from 200
 * before the first centre (or sample 0, which the start's reflection
 * reads up to sample 200) to 200 after the last, within the n samples.
 * Reflections about the end stay inside that range or read zeros.
 */
static int
mel_span_holds(const struct mel_span *sp, size_t first, size_t last)
{
	size_t lo, hi;

	lo = first * MEL_HOP > MEL_N_FFT / 2 ? first * MEL_HOP -
	    MEL_N_FFT / 2 : 0;
	hi = last * MEL_HOP + MEL_N_FFT / 2;
	if (hi < MEL_N_FFT / 2 + 1)
		hi = MEL_N_FFT / 2 + 1;
	if (hi > sp->n)
		hi = sp->n;
	return lo >= hi || (sp->off <= lo && hi <= sp->off + sp->len);
}

int
mel_log(struct mel *m, const float *pcm, size_t n, size_t pad, size_t first,
    size_t n_frames, float *out, size_t ld, float *ret_max, char *err)
{
	struct mel_span sp = { pcm, 0, n, n, pad };

	return mel_log_span(m, &sp, first, n_frames, out, ld, ret_max, err);
}

int
mel_log_span(struct mel *m, const struct mel_span *sp, size_t first,
    size_t n_frames, float *out, size_t ld, float *ret_max, char *err)
{
	size_t total, len;
	float max = MEL_LOG_FLOOR;

	if (sp->n > SIZE_MAX - sp->pad || (sp->len > 0 && sp->pcm == NULL) ||
	    sp->off > sp->n || sp->len > sp->n - sp->off)
		return err_set(err, SOTTO_EINVAL, "mel: bad input signal");
	len = sp->n + sp->pad;
	total = mel_total_frames(sp->n, sp->pad);
	if (first > total || n_frames > total - first)
		return err_set(err, SOTTO_EINVAL,
		    "mel: frames %zu..%zu asked of a signal of %zu frames",
		    first, first + n_frames, total);
	if (n_frames > 0 && (out == NULL || ld < n_frames))
		return err_set(err, SOTTO_EINVAL,
		    "mel: output row stride %zu is under %zu frames", ld,
		    n_frames);
	if (n_frames > 0 && !mel_span_holds(sp, first, first + n_frames - 1))
		return err_set(err, SOTTO_EINVAL, "mel: frames %zu..%zu read "
		    "samples outside the %zu..%zu held", first,
		    first + n_frames, sp->off, sp->off + sp->len);
	/* frames are independent: a share of them per thread */
#pragma omp parallel reduction(max:max) if (n_frames >= MEL_PAR_FRAMES)
	{
		int th = omp_get_thread_num(), nt = omp_get_num_threads();
		/* a team larger than at mel_new(): the plans' worth share */
		int ns = nt < m->n_scratch ? nt : m->n_scratch;
		struct mel_scratch *s = &m->scratch[th < ns ? th : 0];
		size_t t, t0 = th < ns ? n_frames * th / ns : 0;
		size_t t1 = th < ns ? n_frames * (th + 1) / ns : 0;
		float v;

		for (t = t0; t < t1; t++) {
			mel_gather(m, s, sp, len, first + t);
			v = mel_column(m, s, out + t, ld);
			if (v > max)
				max = v;
		}
	}
	if (ret_max != NULL)
		*ret_max = max;
	return 0;
}

/* ref: maximum(log_spec, log_spec.max() - 8.0); (log_spec + 4.0) / 4.0 */
void
mel_normalize(float *mel, size_t rows, size_t cols, size_t ld,
    float max_value)
{
	float lo = max_value - 8.0f, *row;
	size_t r, c;

	for (r = 0; r < rows; r++) {
		row = mel + r * ld;
		for (c = 0; c < cols; c++)
			row[c] = ((row[c] > lo ? row[c] : lo) + 4.0f) * 0.25f;
	}
}
