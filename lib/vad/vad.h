/*
 * Silero VAD internals shared by vad.c (the network), vad-speech.c
 * (speech regions from probabilities), transcribe-vad.c and stream-vad.c.
 */
#ifndef SOTTO_VAD_H
#define SOTTO_VAD_H

#include "sotto.h"

#define VAD_CONTEXT	64	/* samples of the previous chunk */
#define VAD_PAD		64	/* reflect padding on the right */
#define VAD_N_FFT	256
#define VAD_HOP		128
#define VAD_N_FREQ	(VAD_N_FFT / 2 + 1)	/* 129 */
#define VAD_N_FRAMES	4	/* (576 + 64 - 256) / 128 + 1 */
#define VAD_HIDDEN	128
#define VAD_N_CONV	4

/* The network, weights transposed to [in][out]; read-only once loaded. */
struct sotto_vad {
	float	*basis;			/* [256][258] STFT basis */
	float	*conv_w[VAD_N_CONV];	/* [3 * cin][cout] */
	float	*conv_b[VAD_N_CONV];	/* [cout] */
	float	*lstm_w;		/* [2 * 128][512]: w_ih, then w_hh */
	float	 lstm_b[4 * VAD_HIDDEN];	/* b_ih + b_hh */
	float	 head_w[VAD_HIDDEN];
	float	 head_b;
};

/* One stream's recurrent state, context and scratch. */
struct sotto_vad_state {
	const struct sotto_vad *vad;	/* borrowed */
	float	h[VAD_HIDDEN], c[VAD_HIDDEN];
	float	context[VAD_CONTEXT];
	float	in[VAD_CONTEXT + SOTTO_VAD_CHUNK + VAD_PAD];
	float	spec[VAD_N_FRAMES * 2 * VAD_N_FREQ];
	float	x[VAD_N_FRAMES * VAD_N_FREQ];
	float	y[VAD_N_FRAMES * VAD_N_FREQ];
	float	gates[4 * VAD_HIDDEN];
};

#endif
