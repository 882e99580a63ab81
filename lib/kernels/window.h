/*
 * The shape of Whisper's 30 s window, fixed for every model size: the
 * audio and mel frames it holds, and its encoder positions with the row
 * stride of activations over them. The attention kernels (attn-win.h)
 * are built for it; the model and everything above read it from here.
 */
#ifndef SOTTO_WINDOW_H
#define SOTTO_WINDOW_H

#define WHISPER_N_FFT		400
#define WHISPER_HOP		160
#define WHISPER_N_FRAMES	3000	/* mel frames in one 30 s window */
#define WHISPER_N_SAMPLES	480000	/* samples in one 30 s window */
#define WHISPER_N_AUDIO_CTX	1500	/* encoder positions */
/*
 * Row stride of activations over the window: 1500 rounded up to 32 floats
 * (the ANE layout's 64-byte aligned rows; AMX tiles write whole blocks of
 * 32 positions). Positions 1500-1503 are padding, never read as data.
 */
#define WHISPER_AUDIO_LD	1504

#endif
