/*
 * CAM++'s head (3D-Speaker's FCM): 2-D convolutions over the features as
 * an image of 80 frequency rows by T frames, down to 32 channels x 10
 * rows, read as 320 channels per frame by the TDNN part.
 *
 * ref: 3D-Speaker speakerlab/models/campplus/DTDNN.py FCM, BasicResBlock
 *
 *   conv 3x3, 1 -> 32, BN, ReLU                         [32][80][T]
 *   2 residual blocks, the first with stride 2 in frequency [32][40][T]
 *   2 residual blocks, the first with stride 2 in frequency [32][20][T]
 *   conv 3x3, stride (2, 1), BN, ReLU                   [32][10][T]
 *
 * (BNs folded into the convolutions at conversion.) Each convolution is
 * one product W [32][cin * 9] x im2col(x) [cin * 9][F_out * T]: with
 * activations [C][F][T] the product's output is already [32][F_out][T].
 *
 * Memory: every one of these layers runs over the whole image, 80 rows x
 * T, so a long input would need hundreds of megabytes. The head is
 * therefore run over chunks of HEAD_CHUNK frames with HEAD_HALO frames of
 * context on each side: ten convolutions with 3 taps in time see at most
 * 10 frames either way, so each chunk's middle is exactly what the whole
 * sequence gives.
 */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gemm.h"
#include "speaker.h"

#define HEAD_CHUNK	256	/* frames per pass */
#define HEAD_HALO	10	/* time context of the ten 3x3 convolutions */
#define HEAD_W_MAX	(HEAD_CHUNK + 2 * HEAD_HALO)

/* One call's buffers, [32][80][W] each and the im2col columns: views
   into one allocation spk_head() owns; x, t and y trade places. */
struct head_buf {
	float *x, *t, *y;
	float *cols;		/* [32 * 9][40 * W] */
};

/*
 * One row of im2col columns from the plane in[F][W] of one channel: for
 * each output row fo, input row fo * stride + ki - pad shifted by dt
 * frames, zeros outside the image; dst[Fo][W].
 */
static void
im2col_row(const float *in, int F, int W, int ki, int dt, int stride,
    int pad, int Fo, float *dst)
{
	const int lo = dt < 0 ? -dt : 0, hi = dt > 0 ? W - dt : W;
	int fo;

	for (fo = 0; fo < Fo; fo++, dst += W) {
		const int fi = fo * stride + ki - pad;

		if (fi < 0 || fi >= F) {
			memset(dst, 0, W * sizeof(float));
			continue;
		}
		memset(dst, 0, lo * sizeof(float));
		memcpy(dst + lo, in + (size_t)fi * W + lo + dt,
		    (hi - lo) * sizeof(float));
		memset(dst + hi, 0, (W - hi) * sizeof(float));
	}
}

/*
 * out[cout][Fo][W] = w [cout][cin * k * k] * im2col(in[cin][F][W]) + b,
 * ReLU if relu: a k x k convolution (k 3 or 1, zero padding k / 2), with
 * stride in frequency only. Returns Fo through *ret_fo.
 */
static int
conv2d(const float *w, const float *b, int cout, int cin, int k, int stride,
    const float *in, int F, int W, float *out, int relu, float *cols,
    int *ret_fo, char *err)
{
	const int pad = k / 2, Fo = (F + 2 * pad - k) / stride + 1;
	const size_t n = (size_t)Fo * W;
	int ci, ki, kj, rc;

	for (ci = 0; ci < cin; ci++)
		for (ki = 0; ki < k; ki++)
			for (kj = 0; kj < k; kj++)
				im2col_row(in + (size_t)ci * F * W, F, W, ki,
				    kj - pad, stride, pad, Fo, cols +
				    ((size_t)(ci * k + ki) * k + kj) * n);
	if ((rc = gemm_f32('N', 'N', cout, (int)n, cin * k * k, 1.0f, w,
	    cin * k * k, cols, (int)n, 0.0f, out, (int)n, err)) != 0)
		return rc;
	spk_add_bias(out, b, cout, n, relu);
	*ret_fo = Fo;
	return 0;
}

/*
 * One residual block over hb->x [32][F][W] into hb->y, then swapped into
 * hb->x: relu(conv2(relu(conv1(x))) + shortcut(x)). *F becomes its
 * output's rows.
 */
static int
res_block(const struct spk_res_block *rb, struct head_buf *hb, int *F, int W,
    char *err)
{
	const int C = SPK_HEAD_C;
	float *sc = hb->x, *swap;
	size_t i, n;
	int Fo, rc;

	if ((rc = conv2d(rb->conv1_w, rb->conv1_b, C, C, 3, rb->stride, hb->x,
	    *F, W, hb->t, 1, hb->cols, &Fo, err)) != 0 ||
	    (rc = conv2d(rb->conv2_w, rb->conv2_b, C, C, 3, 1, hb->t, Fo, W,
	    hb->y, 0, hb->cols, &Fo, err)) != 0)
		return rc;
	if (rb->sc_w != NULL) {
		if ((rc = conv2d(rb->sc_w, rb->sc_b, C, C, 1, rb->stride,
		    hb->x, *F, W, hb->t, 0, hb->cols, &Fo, err)) != 0)
			return rc;
		sc = hb->t;
	}
	n = (size_t)C * Fo * W;
	for (i = 0; i < n; i++) {
		float v = hb->y[i] + sc[i];

		hb->y[i] = v > 0.0f ? v : 0.0f;
	}
	swap = hb->x;
	hb->x = hb->y;
	hb->y = swap;
	*F = Fo;
	return 0;
}

/*
 * The head over frames [lo, hi) of feats[80][T]; the frames [a, b) of its
 * output go to out[320][T].
 */
static int
head_pass(const struct sotto_speaker *s, struct head_buf *hb,
    const float *feats, int T, int lo, int hi, int a, int b, float *out,
    char *err)
{
	const int W = hi - lo;
	float *in = hb->y;
	int F = SPK_N_MELS, f, c, i, rc;

	for (f = 0; f < SPK_N_MELS; f++)
		memcpy(in + (size_t)f * W, feats + (size_t)f * T + lo,
		    W * sizeof(float));
	if ((rc = conv2d(s->conv1_w, s->conv1_b, SPK_HEAD_C, 1, 3, 1, in, F,
	    W, hb->x, 1, hb->cols, &F, err)) != 0)
		return rc;
	for (i = 0; i < SPK_HEAD_BLOCKS; i++)
		if ((rc = res_block(&s->block[i], hb, &F, W, err)) != 0)
			return rc;
	if ((rc = conv2d(s->conv2_w, s->conv2_b, SPK_HEAD_C, SPK_HEAD_C, 3, 2,
	    hb->x, F, W, hb->y, 1, hb->cols, &F, err)) != 0)
		return rc;
	for (c = 0; c < SPK_HEAD_C * SPK_HEAD_F; c++)
		memcpy(out + (size_t)c * T + a, hb->y + (size_t)c * W +
		    (a - lo), (b - a) * sizeof(float));
	return 0;
}

int
spk_head(const struct sotto_speaker *s, const float *feats, int T,
    float *out, char *err)
{
	const size_t img = (size_t)SPK_HEAD_C * SPK_N_MELS * HEAD_W_MAX;
	struct head_buf hb;
	float *mem;
	int a, rc = 0;

	/* x, t, y and the columns (9 * 32 rows of 40 * W: half an image) */
	mem = malloc((3 * img + 9 * img / 2) * sizeof(float));
	if (mem == NULL)
		return err_set(err, SOTTO_ENOMEM,
		    "speaker: out of memory for the head's buffers");
	hb.x = mem;
	hb.t = mem + img;
	hb.y = mem + 2 * img;
	hb.cols = mem + 3 * img;
	for (a = 0; a < T && rc == 0; a += HEAD_CHUNK) {
		int b = a + HEAD_CHUNK < T ? a + HEAD_CHUNK : T;
		int lo = a > HEAD_HALO ? a - HEAD_HALO : 0;
		int hi = b + HEAD_HALO < T ? b + HEAD_HALO : T;

		rc = head_pass(s, &hb, feats, T, lo, hi, a, b, out, err);
	}
	free(mem);
	return rc;
}
