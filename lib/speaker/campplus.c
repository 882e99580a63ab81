/*
 * CAM++ after its head: the TDNN layer, three densely connected blocks of
 * context-aware masking (CAM) layers, statistics pooling and the
 * embedding layer.
 *
 * ref: 3D-Speaker speakerlab/models/campplus/DTDNN.py CAMPPlus,
 *      layers.py CAMDenseTDNNLayer, CAMLayer, TransitLayer, StatsPool
 *
 *   TDNN: conv1d 320 -> 128, k 5, stride 2, BN, ReLU       [128][T2]
 *   block b (12, 24, 16 layers; dilation 1, 2, 2), each layer:
 *     h = ReLU(BN(lin1(ReLU(BN(x)))))                      [128][T2]
 *     y = local(h): conv1d 128 -> 32, k 3, dilated         [32][T2]
 *     ctx = mean_t(h) + the mean of h over each 100 frames [128][seg]
 *     y *= sigmoid(cam2(ReLU(cam1(ctx))))  (per segment)
 *     x = [x; y]                               (32 channels more)
 *   after each block a transit: conv1x1(ReLU(BN(x))), half the channels
 *   ReLU(BN(x)) [512][T2] -> mean and unbiased std over T2 -> [1024]
 *   dense 1024 -> 192, BN without affine (no ReLU: upstream's form)
 *
 * The dense connections never copy: the block's input and every layer's
 * output live in one [1024][T2] buffer, each layer writing its 32 rows
 * after the ones it read. The mask is constant over a segment, so cam1
 * and cam2 run once per segment, not per frame.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "gemm.h"
#include "speaker.h"

const int spk_block_layers[SPK_N_BLOCKS] = { 12, 24, 16 };
const int spk_block_dilation[SPK_N_BLOCKS] = { 1, 2, 2 };

/* The xvector pass's buffers: x owns one allocation, the others point
   into it (xv_alloc). */
struct xv_buf {
	int T;			/* frames after the TDNN's stride */
	int n_seg;		/* segments of SPK_SEG_LEN frames, the last
				   one possibly shorter */
	float *x;		/* [1024][T]: the dense blocks' features */
	float *a;		/* [1600][T]: im2col columns, or BN-ReLU'd x */
	float *h;		/* [128][T]: a dense layer's bottleneck */
	float *ctx;		/* [128][n_seg] */
	float *hid;		/* [64][n_seg] */
	float *mask;		/* [32][n_seg] */
};

int
spk_conv1d(const float *w, int cout, int cin, int k, int stride, int dil,
    int pad, const float *x, int ldx, int T, float *y, int ldy, float *cols,
    char *err)
{
	const int To = (T + 2 * pad - dil * (k - 1) - 1) / stride + 1;
	int ci, j, t;

	if (k == 1 && stride == 1)
		return gemm_f32('N', 'N', cout, To, cin, 1.0f, w, cin, x, ldx,
		    0.0f, y, ldy, err);
	for (ci = 0; ci < cin; ci++)
		for (j = 0; j < k; j++) {
			float *dst = cols + (size_t)(ci * k + j) * To;
			const float *src = x + (size_t)ci * ldx;

			for (t = 0; t < To; t++) {
				int at = t * stride + j * dil - pad;

				dst[t] = at >= 0 && at < T ? src[at] : 0.0f;
			}
		}
	return gemm_f32('N', 'N', cout, To, cin * k, 1.0f, w, cin * k, cols,
	    To, 0.0f, y, ldy, err);
}

/* y[c][t] = max(0, x[c][t] scale[c] + shift[c]) for c < C, t < T. */
static void
bn_relu(const float *x, const float *scale, const float *shift, int C, int T,
    float *y)
{
	int c, t;

	for (c = 0; c < C; c++) {
		const float *in = x + (size_t)c * T;
		float *out = y + (size_t)c * T;

		for (t = 0; t < T; t++) {
			float v = in[t] * scale[c] + shift[c];

			out[t] = v > 0.0f ? v : 0.0f;
		}
	}
}

void
spk_add_bias(float *y, const float *b, int C, size_t T, int relu)
{
	size_t t;
	int c;

	for (c = 0; c < C; c++) {
		float *row = y + c * T;

		for (t = 0; t < T; t++) {
			float v = row[t] + b[c];

			row[t] = relu && v < 0.0f ? 0.0f : v;
		}
	}
}

/*
 * The CAM context of h[128][T] per segment: the mean over all frames
 * plus the mean over the segment (the last one over the frames it has,
 * as avg_pool1d with ceil_mode gives it).
 */
static void
cam_context(const struct xv_buf *xb)
{
	int c, j, t;

	for (c = 0; c < SPK_BOTTLENECK; c++) {
		const float *row = xb->h + (size_t)c * xb->T;
		double all = 0.0;

		for (t = 0; t < xb->T; t++)
			all += row[t];
		all /= xb->T;
		for (j = 0; j < xb->n_seg; j++) {
			int lo = j * SPK_SEG_LEN, hi = lo + SPK_SEG_LEN;
			double seg = 0.0;

			hi = hi < xb->T ? hi : xb->T;
			for (t = lo; t < hi; t++)
				seg += row[t];
			xb->ctx[c * xb->n_seg + j] = (float)(all + seg /
			    (hi - lo));
		}
	}
}

/* y[32][T] *= sigmoid(cam2(ReLU(cam1(ctx)))), per segment. */
static int
cam_mask(const struct spk_dense_layer *l, const struct xv_buf *xb, float *y,
    char *err)
{
	const int S = xb->n_seg;
	int c, t, rc;

	cam_context(xb);
	if ((rc = gemm_f32('N', 'N', SPK_CAM_HIDDEN, S, SPK_BOTTLENECK, 1.0f,
	    l->cam1_w, SPK_BOTTLENECK, xb->ctx, S, 0.0f, xb->hid, S,
	    err)) != 0)
		return rc;
	spk_add_bias(xb->hid, l->cam1_b, SPK_CAM_HIDDEN, S, 1);
	if ((rc = gemm_f32('N', 'N', SPK_GROWTH, S, SPK_CAM_HIDDEN, 1.0f,
	    l->cam2_w, SPK_CAM_HIDDEN, xb->hid, S, 0.0f, xb->mask, S,
	    err)) != 0)
		return rc;
	for (c = 0; c < SPK_GROWTH * S; c++)
		xb->mask[c] = 1.0f / (1.0f + expf(-(xb->mask[c] +
		    l->cam2_b[c / S])));
	for (c = 0; c < SPK_GROWTH; c++)
		for (t = 0; t < xb->T; t++)
			y[(size_t)c * xb->T + t] *= xb->mask[c * S +
			    t / SPK_SEG_LEN];
	return 0;
}

/* One dense layer: reads x[0, cin), appends its 32 rows after them. */
static int
dense_layer(const struct spk_dense_layer *l, struct xv_buf *xb, char *err)
{
	const int T = xb->T;
	float *y = xb->x + (size_t)l->cin * T;
	int rc;

	bn_relu(xb->x, l->bn_scale, l->bn_shift, l->cin, T, xb->a);
	if ((rc = gemm_f32('N', 'N', SPK_BOTTLENECK, T, l->cin, 1.0f,
	    l->lin1_w, l->cin, xb->a, T, 0.0f, xb->h, T, err)) != 0)
		return rc;
	spk_add_bias(xb->h, l->lin1_b, SPK_BOTTLENECK, T, 1);
	if ((rc = spk_conv1d(l->local_w, SPK_GROWTH, SPK_BOTTLENECK, 3, 1,
	    l->dilation, l->dilation, xb->h, T, T, y, T, xb->a, err)) != 0)
		return rc;
	return cam_mask(l, xb, y, err);
}

/* x[0, cin / 2) = w ReLU(BN(x[0, cin))). */
static int
transit(const struct spk_transit *tr, struct xv_buf *xb, char *err)
{
	bn_relu(xb->x, tr->bn_scale, tr->bn_shift, tr->cin, xb->T, xb->a);
	return gemm_f32('N', 'N', tr->cin / 2, xb->T, tr->cin, 1.0f, tr->w,
	    tr->cin, xb->a, xb->T, 0.0f, xb->x, xb->T, err);
}

/* ReLU(BN(x)) [512][T], then its mean and unbiased std: stats[1024]. */
static void
stats_pool(const struct sotto_speaker *s, struct xv_buf *xb, float *stats)
{
	const int T = xb->T;
	int c, t;

	bn_relu(xb->x, s->out_scale, s->out_shift, SPK_OUT_C, T, xb->a);
	for (c = 0; c < SPK_OUT_C; c++) {
		const float *row = xb->a + (size_t)c * T;
		double sum = 0.0, var = 0.0, mean;

		for (t = 0; t < T; t++)
			sum += row[t];
		mean = sum / T;
		for (t = 0; t < T; t++)
			var += (row[t] - mean) * (row[t] - mean);
		stats[c] = (float)mean;
		stats[SPK_OUT_C + c] = (float)sqrt(var / (T - 1));
	}
}

static int
xv_alloc(struct xv_buf *xb, int T2)
{
	const size_t T = (size_t)T2;

	xb->T = T2;
	xb->n_seg = (T2 + SPK_SEG_LEN - 1) / SPK_SEG_LEN;
	/* calloc: zeros cost nothing next to the network, and GCC cannot
	   tell that the im2col loops fill what the products read */
	xb->x = calloc((SPK_MAX_C + SPK_TDNN_IN * 5 + SPK_BOTTLENECK) * T +
	    (SPK_BOTTLENECK + SPK_CAM_HIDDEN + SPK_GROWTH) *
	    (size_t)xb->n_seg, sizeof(float));
	if (xb->x == NULL)
		return -1;
	xb->a = xb->x + SPK_MAX_C * T;
	xb->h = xb->a + SPK_TDNN_IN * 5 * T;
	xb->ctx = xb->h + SPK_BOTTLENECK * T;
	xb->hid = xb->ctx + SPK_BOTTLENECK * (size_t)xb->n_seg;
	xb->mask = xb->hid + SPK_CAM_HIDDEN * (size_t)xb->n_seg;
	return 0;
}

/* TDNN, the dense blocks with their transits, pooling into stats. */
static int
xv_layers(const struct sotto_speaker *s, struct xv_buf *xb, const float *h,
    int T, float *stats, char *err)
{
	int b, i, l = 0, rc;

	if ((rc = spk_conv1d(s->tdnn_w, SPK_TDNN_C, SPK_TDNN_IN, 5, 2, 1, 2,
	    h, T, T, xb->x, xb->T, xb->a, err)) != 0)
		return rc;
	spk_add_bias(xb->x, s->tdnn_b, SPK_TDNN_C, xb->T, 1);
	for (b = 0; b < SPK_N_BLOCKS; b++) {
		for (i = 0; i < spk_block_layers[b]; i++, l++)
			if ((rc = dense_layer(&s->layer[l], xb, err)) != 0)
				return rc;
		if ((rc = transit(&s->transit[b], xb, err)) != 0)
			return rc;
	}
	stats_pool(s, xb, stats);
	return 0;
}

int
spk_xvector(const struct sotto_speaker *s, const float *h, int T,
    float emb[SPK_DIM], char *err)
{
	struct xv_buf xb;
	float stats[2 * SPK_OUT_C];
	int rc;

	if (xv_alloc(&xb, (T - 1) / 2 + 1) != 0)
		return err_set(err, SOTTO_ENOMEM,
		    "speaker: out of memory for %d frames", T);
	rc = xv_layers(s, &xb, h, T, stats, err);
	free(xb.x);
	if (rc != 0)
		return rc;
	/* emb = dense_w stats + dense_b */
	if ((rc = gemm_f32('N', 'N', SPK_DIM, 1, 2 * SPK_OUT_C, 1.0f,
	    s->dense_w, 2 * SPK_OUT_C, stats, 1, 0.0f, emb, 1, err)) != 0)
		return rc;
	spk_add_bias(emb, s->dense_b, SPK_DIM, 1, 0);
	return 0;
}
