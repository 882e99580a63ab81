/*
 * CAM++ speaker embeddings, internals shared by speaker.c (loading, the
 * public calls), fbank.c (Kaldi filter-bank features), campplus-head.c
 * (the 2-D convolution head) and campplus.c (the TDNN part, pooling and
 * the embedding).
 *
 * Activations are channels-first, [C][T] with T (frames) contiguous, as
 * everywhere in libsotto; the head's are [C][F][T] (F: frequency rows).
 * Weights are the GGUF's F32 tensors in PyTorch's layout ([Cout][Cin][k]
 * is [Cout][Cin * k] row-major, the row order im2col writes), borrowed
 * from the struct gguf the model owns.
 */
#ifndef SOTTO_SPEAKER_H
#define SOTTO_SPEAKER_H

#include <stddef.h>

#include "sotto.h"

/* Features: Kaldi fbank (docs/model-format.md, "CAM++"). */
#define SPK_N_MELS	80
#define SPK_FRAME	400	/* samples, 25 ms */
#define SPK_SHIFT	160	/* samples, 10 ms */
#define SPK_N_FFT	512
#define SPK_N_BINS	(SPK_N_FFT / 2)	/* Kaldi's bins: no Nyquist */

/* The network. */
#define SPK_HEAD_C	32	/* channels of the 2-D head */
#define SPK_HEAD_F	(SPK_N_MELS / 8)	/* its output rows: 10 */
#define SPK_TDNN_IN	(SPK_HEAD_C * SPK_HEAD_F)	/* 320 */
#define SPK_TDNN_C	128
#define SPK_GROWTH	32
#define SPK_BOTTLENECK	128
#define SPK_CAM_HIDDEN	(SPK_BOTTLENECK / 2)
#define SPK_SEG_LEN	100	/* frames of the CAM segment pooling */
#define SPK_N_BLOCKS	3
#define SPK_N_LAYERS	52	/* 12 + 24 + 16 dense layers */
#define SPK_MAX_C	1024	/* widest dense block */
#define SPK_OUT_C	512
#define SPK_DIM		SOTTO_SPEAKER_DIM

/* The head's residual blocks: two stages of two, stride 2 in frequency
   at the first of each (with a 1x1 convolution as its shortcut). */
#define SPK_HEAD_BLOCKS	4

struct spk_res_block {
	const float *conv1_w, *conv1_b;	/* [32][32 * 3 * 3], [32] */
	const float *conv2_w, *conv2_b;
	const float *sc_w, *sc_b;	/* [32][32]; NULL: identity shortcut */
	int stride;			/* in frequency: 2 or 1 */
};

/* One CAM dense layer (xvector.blockB.tdnndL); BNs folded (convert). */
struct spk_dense_layer {
	int cin;			/* 128 + 32 L (block 1), ... */
	int dilation;
	const float *bn_scale, *bn_shift;	/* [cin]: nonlinear1 */
	const float *lin1_w, *lin1_b;	/* [128][cin] + nonlinear2 folded */
	const float *local_w;		/* [32][128 * 3], no bias */
	const float *cam1_w, *cam1_b;	/* [64][128], [64] */
	const float *cam2_w, *cam2_b;	/* [32][64], [32] */
};

struct spk_transit {
	int cin;			/* its output is cin / 2 */
	const float *bn_scale, *bn_shift;	/* [cin] */
	const float *w;			/* [cin / 2][cin], no bias */
};

/* The network, read-only once loaded: may be shared by threads. */
struct sotto_speaker {
	struct gguf *gguf;		/* owned: every weight points into it */
	/* head (FCM), BNs folded */
	const float *conv1_w, *conv1_b;	/* [32][1 * 3 * 3], [32] */
	struct spk_res_block block[SPK_HEAD_BLOCKS];
	const float *conv2_w, *conv2_b;	/* [32][32 * 3 * 3], stride 2 */
	/* xvector */
	const float *tdnn_w, *tdnn_b;	/* [128][320 * 5], stride 2 */
	struct spk_dense_layer layer[SPK_N_LAYERS];
	struct spk_transit transit[SPK_N_BLOCKS];
	const float *out_scale, *out_shift;	/* [512] */
	const float *dense_w, *dense_b;	/* [192][1024], BN folded */
	float mel[SPK_N_MELS][SPK_N_BINS];	/* Kaldi's triangular filters */
	int mel_lo[SPK_N_MELS], mel_hi[SPK_N_MELS];	/* non-zero bins */
	float window[SPK_FRAME];	/* Povey */
};

/* Layers of each dense block, and its dilation. */
extern const int spk_block_layers[SPK_N_BLOCKS];
extern const int spk_block_dilation[SPK_N_BLOCKS];

/* ---- fbank.c ---- */

/* Frames of n samples (snip_edges): 0 when n < SPK_FRAME. */
size_t	fbank_frames(size_t n);
/* The mel filters and window of s, from the constants. */
void	fbank_init(struct sotto_speaker *s);
/*
 * Log mel filter-bank energies of pcm[n] minus their mean over time, as
 * feats[80][T] (T = fbank_frames(n) > 0, row stride T). 0 or SOTTO_ENOMEM.
 */
int	fbank_compute(const struct sotto_speaker *s, const float *pcm,
	    size_t n, float *feats, char *err);

/* ---- campplus-head.c ---- */

/*
 * The 2-D head over feats[80][T]: out[320][T] (row c * 10 + f). Runs in
 * chunks of frames with enough context on each side that the result is
 * the whole sequence's. 0, SOTTO_ENOMEM or SOTTO_ECOMPUTE.
 */
int	spk_head(const struct sotto_speaker *s, const float *feats, int T,
	    float *out, char *err);

/* ---- campplus.c ---- */

/*
 * y[cout][To] (row stride ldy) = W [cout][cin * k] * im2col(x), for a
 * conv1d over x[cin][T] (row stride ldx) with kernel k, stride, dilation
 * and zero padding pad; cols is scratch of cin * k * To floats. To =
 * (T + 2 pad - dil (k - 1) - 1) / stride + 1.
 */
int	spk_conv1d(const float *w, int cout, int cin, int k, int stride,
	    int dil, int pad, const float *x, int ldx, int T, float *y,
	    int ldy, float *cols, char *err);
/* y[c][t] += b[c] for c < C, t < T; then ReLU if relu. */
void	spk_add_bias(float *y, const float *b, int C, size_t T, int relu);
/*
 * The embedding (not normalised) of the head's output h[320][T]: TDNN,
 * dense blocks, statistics pooling, dense layer. 0, SOTTO_ENOMEM or
 * SOTTO_ECOMPUTE.
 */
int	spk_xvector(const struct sotto_speaker *s, const float *h, int T,
	    float emb[SPK_DIM], char *err);

/* ---- cluster.c ---- */

/*
 * Where two groups of pieces are one speaker: their weighted average
 * cosine (docs/speakers.md, "Labelling speakers"). Same-speaker pieces of
 * 1.5-3 s score 0.7 or more (1st percentile), different speakers 0.3 or
 * less (highest): between the two.
 */
#define CLUSTER_THRESHOLD	0.5f
/* The n x n similarities of more would take more than 64 MB. */
#define CLUSTER_MAX_POINTS	4096

/* When to stop merging. */
struct cluster_params {
	int n_clusters;		/* exactly this many (or n); 0: estimate */
	int min_clusters;	/* estimating: at least (0 or 1: none) */
	int max_clusters;	/* estimating: at most; 0: no limit */
	float threshold;	/* CLUSTER_THRESHOLD */
};

void	cluster_params_init(struct cluster_params *);
/*
 * Agglomerative clustering, average linkage on the cosine, of
 * emb[n][dim] (unit length), piece i weighing w[i] (NULL: all 1):
 * labels[n] receives each piece's group, 0, 1, ... in order of first
 * appearance. Returns the number of groups (0 when n is 0), or
 * SOTTO_ENOMEM, or SOTTO_EINVAL over CLUSTER_MAX_POINTS pieces.
 */
int	cluster_ahc(const float *emb, const float *w, int n, int dim,
	    const struct cluster_params *p, int *labels, char *err);

/* ---- track.c ---- */

/*
 * Live labels (track.c): the cosine with a speaker's centroid at which a
 * piece of at least 1 s is that speaker (docs/speakers.md, "Live").
 */
#define TRACK_THRESHOLD	0.5f

/* The speakers seen so far; sum and weight owned (track_clear). */
struct track_state {
	float *sum;		/* [n][SPK_DIM]: each speaker's pieces'
				   embeddings times their seconds */
	double *weight;		/* [n]: their seconds */
	int n;
	float threshold;
};

void	track_init(struct track_state *, float threshold);	/* 0: default */
void	track_clear(struct track_state *);
/*
 * The speaker (1, 2, ...) of a piece of seconds whose embedding is emb
 * (unit length): the nearest one at or over the threshold, which it
 * joins, else a new one; a piece under 1 s takes the nearest and changes
 * nothing (the first piece starts speaker 1). *ret_cos (may be NULL): the
 * cosine with the nearest centroid (-2: none). SOTTO_ENOMEM.
 */
int	track_decide(struct track_state *, const float *emb, double seconds,
	    float *ret_cos, char *err);

#endif
