/*
 * Kaldi filter-bank features for CAM++.
 *
 * ref: torchaudio/compliance/kaldi.py fbank() with 3D-Speaker's options
 * (num_mel_bins 80, 16 kHz, dither 0, the rest Kaldi's defaults), then
 * 3D-Speaker's mean normalisation over time (speakerlab FBank):
 *
 *   frames of 400 samples every 160, only whole ones (snip_edges)
 *   per frame: minus its mean; pre-emphasis x[i] -= 0.97 x[i - 1] (x[0]
 *   -= 0.97 x[0]); Povey window (Hann ^ 0.85 over N - 1); zero-padded to
 *   512; power spectrum
 *   80 triangular filters, equal steps of the Kaldi mel scale
 *   1127 ln(1 + f / 700) from 20 Hz to 8 kHz, over bins 0..255
 *   ln(max(energy, FLT_EPSILON)), then minus each bin's mean over frames
 *
 * The FFT is kissfft's real transform, the one the Whisper mel uses. Each
 * filter is non-zero over a few bins only (1 to 16 of 256), which
 * fbank_init() records.
 */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <kiss_fftr.h>

#include "err.h"
#include "speaker.h"

#define FBANK_PREEMPH	0.97f
#define FBANK_LOW_HZ	20.0
#define FBANK_HIGH_HZ	8000.0

size_t
fbank_frames(size_t n)
{
	return n < SPK_FRAME ? 0 : 1 + (n - SPK_FRAME) / SPK_SHIFT;
}

static double
mel_scale(double hz)
{
	return 1127.0 * log(1.0 + hz / 700.0);
}

void
fbank_init(struct sotto_speaker *s)
{
	const double lo = mel_scale(FBANK_LOW_HZ);
	const double delta = (mel_scale(FBANK_HIGH_HZ) - lo) / (SPK_N_MELS + 1);
	int m, k;

	for (m = 0; m < SPK_N_MELS; m++) {
		double left = lo + m * delta, centre = left + delta;
		double right = centre + delta;

		for (k = 0; k < SPK_N_BINS; k++) {
			double mel = mel_scale(k * (double)SOTTO_SAMPLE_RATE /
			    SPK_N_FFT);
			double up = (mel - left) / (centre - left);
			double down = (right - mel) / (right - centre);
			double w = up < down ? up : down;

			s->mel[m][k] = w > 0.0 ? (float)w : 0.0f;
		}
		s->mel_lo[m] = s->mel_hi[m] = 0;
		for (k = 0; k < SPK_N_BINS; k++)
			if (s->mel[m][k] != 0.0f) {
				if (s->mel_hi[m] == 0)
					s->mel_lo[m] = k;
				s->mel_hi[m] = k + 1;
			}
	}
	for (k = 0; k < SPK_FRAME; k++)
		s->window[k] = (float)pow(0.5 - 0.5 * cos(2.0 * M_PI * k /
		    (SPK_FRAME - 1)), 0.85);
}

/* One frame of pcm (SPK_FRAME samples) into frame[SPK_N_FFT]. */
static void
fbank_frame(const struct sotto_speaker *s, const float *pcm, float *frame)
{
	float mean = 0.0f;
	int i;

	for (i = 0; i < SPK_FRAME; i++)
		mean += pcm[i];
	mean /= SPK_FRAME;
	for (i = 0; i < SPK_FRAME; i++)
		frame[i] = pcm[i] - mean;
	for (i = SPK_FRAME - 1; i > 0; i--)
		frame[i] -= FBANK_PREEMPH * frame[i - 1];
	frame[0] -= FBANK_PREEMPH * frame[0];
	for (i = 0; i < SPK_FRAME; i++)
		frame[i] *= s->window[i];
	memset(frame + SPK_FRAME, 0, (SPK_N_FFT - SPK_FRAME) * sizeof(float));
}

/* Log mel energies of frame t into feats[m * T + t]. */
static void
fbank_mels(const struct sotto_speaker *s, const kiss_fft_cpx *spec,
    float *feats, size_t T, size_t t)
{
	float power[SPK_N_BINS];
	int m, k;

	for (k = 0; k < SPK_N_BINS; k++)
		power[k] = spec[k].r * spec[k].r + spec[k].i * spec[k].i;
	for (m = 0; m < SPK_N_MELS; m++) {
		float e = 0.0f;

		for (k = s->mel_lo[m]; k < s->mel_hi[m]; k++)
			e += s->mel[m][k] * power[k];
		feats[m * T + t] = logf(e > FLT_EPSILON ? e : FLT_EPSILON);
	}
}

/* Minus each row's mean over its T frames. */
static void
fbank_cmn(float *feats, size_t T)
{
	size_t t;
	int m;

	for (m = 0; m < SPK_N_MELS; m++) {
		float *row = feats + m * T;
		double sum = 0.0;
		float mean;

		for (t = 0; t < T; t++)
			sum += row[t];
		mean = (float)(sum / (double)T);
		for (t = 0; t < T; t++)
			row[t] -= mean;
	}
}

int
fbank_compute(const struct sotto_speaker *s, const float *pcm, size_t n,
    float *feats, char *err)
{
	const size_t T = fbank_frames(n);
	kiss_fft_cpx spec[SPK_N_FFT / 2 + 1];
	float frame[SPK_N_FFT];
	kiss_fftr_cfg fft;
	size_t t;

	/* a plan per call: kiss_fftr writes into its plan */
	if ((fft = kiss_fftr_alloc(SPK_N_FFT, 0, NULL, NULL)) == NULL)
		return err_set(err, SOTTO_ENOMEM,
		    "speaker: out of memory for the FFT plan");
	for (t = 0; t < T; t++) {
		fbank_frame(s, pcm + t * SPK_SHIFT, frame);
		kiss_fftr(fft, frame, spec);
		fbank_mels(s, spec, feats, T, t);
	}
	kiss_fftr_free(fft);
	fbank_cmn(feats, T);
	return 0;
}
