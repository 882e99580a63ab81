/*
 * The one place where outside audio becomes samples the engine trusts:
 * sottod's client and microphone audio and `sotto transcribe`'s files
 * all go through sotto_pcm_mix() before they are resampled.
 *
 * Why before the resampler: libsamplerate's filter keeps every input in
 * its state, so a single NaN poisons all the output after it, and one
 * sample of 1e10 spreads over the filter's length. Why at all: a window's
 * log-mel is normalised by the file's maximum, so one huge sample turns
 * the rest of its window into silence for the model (a 30 s window
 * transcribed as "—"), 1e20 made decoding seven times slower with
 * garbage out, and a file of NaN passed the silence check (RMS NaN) and
 * came out as "You".
 */
#include <math.h>

#include "sotto.h"

size_t
sotto_pcm_mix(const float *in, size_t frames, int channels, float *out)
{
	size_t i, bad = 0;
	float sum, v;
	int c;

	if (channels < 1)
		return 0;
	for (i = 0; i < frames; i++) {
		sum = 0.0f;
		for (c = 0; c < channels; c++) {
			v = in[i * (size_t)channels + c];
			if (!isfinite(v)) {
				v = 0.0f;
				bad++;
			}
			sum += v;
		}
		v = channels == 1 ? sum : sum / channels;
		out[i] = v > 1.0f ? 1.0f : v < -1.0f ? -1.0f : v;
	}
	return bad;
}
