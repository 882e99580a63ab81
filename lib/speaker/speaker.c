/*
 * CAM++ speaker embeddings: the GGUF (tools/convert_campplus.py) checked
 * and bound, and sotto_speaker_embed(): features (fbank.c), the head
 * (campplus-head.c), the rest of the network (campplus.c), then the
 * embedding scaled to length 1.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "err.h"
#include "gguf.h"
#include "speaker.h"

#define ARCH		"campplus"
/* 3 frames: the TDNN's stride leaves 2, the fewest an unbiased std has */
#define SPK_MIN_SAMPLES	(SPK_FRAME + 2 * SPK_SHIFT)

/*
 * *ret = the F32 tensor name[d0][d1][d2][d3] (n_dims of them), from the
 * name made of fmt.
 */
static int
tensor(const struct gguf *g, const float **ret, char *err, int n_dims,
    int64_t d0, int64_t d1, int64_t d2, int64_t d3, const char *fmt, ...)
    __attribute__((format(printf, 9, 10)));

static int
tensor(const struct gguf *g, const float **ret, char *err, int n_dims,
    int64_t d0, int64_t d1, int64_t d2, int64_t d3, const char *fmt, ...)
{
	const int64_t dims[4] = { d0, d1, d2, d3 };
	char name[64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	return gguf_expect_f32(g, name, n_dims, dims, ret, err);
}

static const struct gguf_want_u32 meta_keys[] = {
	{ ARCH ".sample_rate", SOTTO_SAMPLE_RATE },
	{ ARCH ".n_mels", SPK_N_MELS },
	{ ARCH ".frame_length", SPK_FRAME },
	{ ARCH ".frame_shift", SPK_SHIFT },
	{ ARCH ".n_fft", SPK_N_FFT },
	{ ARCH ".embedding_length", SPK_DIM },
	{ ARCH ".seg_len", SPK_SEG_LEN },
};

static const struct gguf_kind kind = {
	.arch = ARCH,
	.what = "CAM++ speaker",
	.runs = "16 kHz, 80-mel, 192-dimension CAM++",
	.fetch_name = "campplus",
	.keys = meta_keys,
	.n_keys = sizeof(meta_keys) / sizeof(meta_keys[0]),
};

static int
bind_head(struct sotto_speaker *s, const struct gguf *g, char *err)
{
	const int C = SPK_HEAD_C;
	int i, rc;

	if ((rc = tensor(g, &s->conv1_w, err, 4, C, 1, 3, 3,
	    "spk.head.conv1.w")) || (rc = tensor(g, &s->conv1_b, err, 1, C,
	    0, 0, 0, "spk.head.conv1.b")) || (rc = tensor(g, &s->conv2_w,
	    err, 4, C, C, 3, 3, "spk.head.conv2.w")) || (rc = tensor(g,
	    &s->conv2_b, err, 1, C, 0, 0, 0, "spk.head.conv2.b")))
		return rc;
	for (i = 0; i < SPK_HEAD_BLOCKS; i++) {
		struct spk_res_block *rb = &s->block[i];
		const int st = 1 + i / 2, bl = i % 2;

		rb->stride = bl == 0 ? 2 : 1;
		if ((rc = tensor(g, &rb->conv1_w, err, 4, C, C, 3, 3,
		    "spk.head.l%d.%d.conv1.w", st, bl)) || (rc = tensor(g,
		    &rb->conv1_b, err, 1, C, 0, 0, 0,
		    "spk.head.l%d.%d.conv1.b", st, bl)) || (rc = tensor(g,
		    &rb->conv2_w, err, 4, C, C, 3, 3,
		    "spk.head.l%d.%d.conv2.w", st, bl)) || (rc = tensor(g,
		    &rb->conv2_b, err, 1, C, 0, 0, 0,
		    "spk.head.l%d.%d.conv2.b", st, bl)))
			return rc;
		if (bl == 0 && ((rc = tensor(g, &rb->sc_w, err, 4, C, C, 1,
		    1, "spk.head.l%d.%d.sc.w", st, bl)) || (rc = tensor(g,
		    &rb->sc_b, err, 1, C, 0, 0, 0, "spk.head.l%d.%d.sc.b",
		    st, bl))))
			return rc;
	}
	return 0;
}

static int
bind_layer(struct spk_dense_layer *l, const struct gguf *g, int b, int i,
    int cin, char *err)
{
	const int B = SPK_BOTTLENECK, H = SPK_CAM_HIDDEN, G = SPK_GROWTH;
	int rc;

	l->cin = cin;
	l->dilation = spk_block_dilation[b];
	if ((rc = tensor(g, &l->bn_scale, err, 1, cin, 0, 0, 0,
	    "spk.d%d.%d.bn1.scale", b + 1, i)) || (rc = tensor(g,
	    &l->bn_shift, err, 1, cin, 0, 0, 0, "spk.d%d.%d.bn1.shift", b + 1,
	    i)) || (rc = tensor(g, &l->lin1_w, err, 2, B, cin, 0, 0,
	    "spk.d%d.%d.lin1.w", b + 1, i)) || (rc = tensor(g, &l->lin1_b,
	    err, 1, B, 0, 0, 0, "spk.d%d.%d.lin1.b", b + 1, i)) ||
	    (rc = tensor(g, &l->local_w, err, 3, G, B, 3, 0,
	    "spk.d%d.%d.local.w", b + 1, i)) || (rc = tensor(g, &l->cam1_w,
	    err, 2, H, B, 0, 0, "spk.d%d.%d.cam1.w", b + 1, i)) ||
	    (rc = tensor(g, &l->cam1_b, err, 1, H, 0, 0, 0,
	    "spk.d%d.%d.cam1.b", b + 1, i)) || (rc = tensor(g, &l->cam2_w,
	    err, 2, G, H, 0, 0, "spk.d%d.%d.cam2.w", b + 1, i)) ||
	    (rc = tensor(g, &l->cam2_b, err, 1, G, 0, 0, 0,
	    "spk.d%d.%d.cam2.b", b + 1, i)))
		return rc;
	return 0;
}

static int
bind_xvector(struct sotto_speaker *s, const struct gguf *g, char *err)
{
	int b, i, l = 0, c = SPK_TDNN_C, rc;

	if ((rc = tensor(g, &s->tdnn_w, err, 3, SPK_TDNN_C, SPK_TDNN_IN, 5,
	    0, "spk.tdnn.w")) || (rc = tensor(g, &s->tdnn_b, err, 1,
	    SPK_TDNN_C, 0, 0, 0, "spk.tdnn.b")))
		return rc;
	for (b = 0; b < SPK_N_BLOCKS; b++) {
		struct spk_transit *tr = &s->transit[b];

		for (i = 0; i < spk_block_layers[b]; i++, l++)
			if ((rc = bind_layer(&s->layer[l], g, b, i,
			    c + i * SPK_GROWTH, err)) != 0)
				return rc;
		c += spk_block_layers[b] * SPK_GROWTH;
		tr->cin = c;
		if ((rc = tensor(g, &tr->bn_scale, err, 1, c, 0, 0, 0,
		    "spk.t%d.bn.scale", b + 1)) || (rc = tensor(g,
		    &tr->bn_shift, err, 1, c, 0, 0, 0, "spk.t%d.bn.shift",
		    b + 1)) || (rc = tensor(g, &tr->w, err, 2, c / 2, c, 0, 0,
		    "spk.t%d.w", b + 1)))
			return rc;
		c /= 2;
	}
	if ((rc = tensor(g, &s->out_scale, err, 1, SPK_OUT_C, 0, 0, 0,
	    "spk.out.bn.scale")) || (rc = tensor(g, &s->out_shift, err, 1,
	    SPK_OUT_C, 0, 0, 0, "spk.out.bn.shift")) || (rc = tensor(g,
	    &s->dense_w, err, 2, SPK_DIM, 2 * SPK_OUT_C, 0, 0,
	    "spk.dense.w")) || (rc = tensor(g, &s->dense_b, err, 1, SPK_DIM,
	    0, 0, 0, "spk.dense.b")))
		return rc;
	return 0;
}

int
sotto_speaker_load(const char *path, struct sotto_speaker **ret, char *err)
{
	struct sotto_speaker *s;
	int rc;

	*ret = NULL;
	if ((s = calloc(1, sizeof(*s))) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if ((rc = gguf_open(path, &s->gguf, err)) != 0 ||
	    (rc = gguf_check_kind(s->gguf, &kind, err)) != 0 ||
	    (rc = bind_head(s, s->gguf, err)) != 0 ||
	    (rc = bind_xvector(s, s->gguf, err)) != 0) {
		sotto_speaker_free(s);
		return rc;
	}
	fbank_init(s);
	*ret = s;
	return 0;
}

void
sotto_speaker_free(struct sotto_speaker *s)
{
	if (s == NULL)
		return;
	gguf_close(s->gguf);
	free(s);
}

/* v /= |v|; a zero vector stays zero. */
static void
normalise(float *v, int n)
{
	double sum = 0.0;
	int i;

	for (i = 0; i < n; i++)
		sum += (double)v[i] * v[i];
	if (sum > 0.0)
		for (i = 0; i < n; i++)
			v[i] = (float)(v[i] / sqrt(sum));
}

int
sotto_speaker_embed(const struct sotto_speaker *s, const float *pcm,
    size_t n, float *out, char *err)
{
	size_t T;
	float *feats, *head;
	int rc;

	if (s == NULL || pcm == NULL || out == NULL)
		return err_set(err, SOTTO_EINVAL, "speaker: no model, audio or "
		    "output given");
	if (n < SPK_MIN_SAMPLES)
		return err_set(err, SOTTO_EINVAL, "speaker: need at least %d "
		    "samples (45 ms at 16 kHz) to embed, got %zu",
		    SPK_MIN_SAMPLES, n);
	if (n > (size_t)SOTTO_SPEAKER_MAX_S * SOTTO_SAMPLE_RATE)
		return err_set(err, SOTTO_EINVAL, "speaker: at most %d s of "
		    "audio in one embedding, got %.1f s: embed parts of it",
		    SOTTO_SPEAKER_MAX_S, (double)n / SOTTO_SAMPLE_RATE);
	T = fbank_frames(n);
	feats = malloc((size_t)(SPK_N_MELS + SPK_TDNN_IN) * T *
	    sizeof(float));
	if (feats == NULL)
		return err_set(err, SOTTO_ENOMEM, "speaker: out of memory "
		    "for %zu frames", T);
	head = feats + (size_t)SPK_N_MELS * T;
	if ((rc = fbank_compute(s, pcm, n, feats, err)) == 0 &&
	    (rc = spk_head(s, feats, (int)T, head, err)) == 0 &&
	    (rc = spk_xvector(s, head, (int)T, out, err)) == 0)
		normalise(out, SPK_DIM);
	free(feats);
	return rc;
}
