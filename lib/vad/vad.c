/*
 * Silero VAD (v5/v6 network, 16 kHz): a speech probability for every
 * 512-sample chunk (32 ms), as the silero-vad package's ONNX model
 * computes it (ref: silero_vad/tinygrad_model.py, utils_vad.OnnxWrapper).
 *
 * Per chunk the input is the last VAD_CONTEXT samples of the previous
 * chunk (zeros at the start) followed by the chunk, 576 samples:
 *   reflect-pad 64 on the right                        -> [640]
 *   STFT as a strided convolution with the model's basis (256 taps,
 *   hop 128): 4 frames x 258 (129 real, 129 imaginary) -> magnitude
 *                                                        -> [4][129]
 *   4 conv1d (kernel 3, padding 1; strides 1, 2, 2, 1) each with ReLU
 *                                                        -> [1][128]
 *   LSTM cell (128, gates i f g o), state (h, c) kept per stream
 *   ReLU(h), 1x1 conv to one value, sigmoid              -> probability
 *
 * Activations are time-major ([T][C], C contiguous), and every product
 * is y[out] += w[in][out] * x[in] with the weights transposed at load
 * ([in][out]), so the inner loop runs over contiguous outputs and
 * vectorises (AVX-512 / AVX2 clones). One chunk is ~0.7 M multiply-adds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clones.h"
#include "err.h"
#include "gguf.h"
#include "vad.h"


static const struct vad_conv_dims {
	int cin, cout, stride;
} conv_dims[VAD_N_CONV] = {
	{ VAD_N_FREQ, 128, 1 }, { 128, 64, 2 }, { 64, 64, 2 },
	{ 64, VAD_HIDDEN, 1 },
};

/* y[o] += sum_i wt[i][o] x[i], for o < n_out. */
CLONES static void
matvec_t(const float *restrict wt, const float *restrict x, int n_in,
    int n_out, float *restrict y)
{
	int i, o;

	for (i = 0; i < n_in; i++) {
		const float a = x[i], *w = wt + (size_t)i * n_out;

		if (a == 0.0f)
			continue;	/* ReLU outputs and padding */
		for (o = 0; o < n_out; o++)
			y[o] += a * w[o];
	}
}

/* [rows][cols] -> [cols][rows], a copy the caller frees. */
static float *
transpose(const float *w, int rows, int cols)
{
	float *t = malloc((size_t)rows * cols * sizeof(float));
	int r, c;

	if (t == NULL)
		return NULL;
	for (r = 0; r < rows; r++)
		for (c = 0; c < cols; c++)
			t[(size_t)c * rows + r] = w[(size_t)r * cols + c];
	return t;
}

/* conv weight [cout][cin][3] -> [3 * cin][cout], row k * cin + ci. */
static float *
conv_weight(const float *w, int cin, int cout)
{
	float *t = malloc((size_t)3 * cin * cout * sizeof(float));
	int o, i, k;

	if (t == NULL)
		return NULL;
	for (o = 0; o < cout; o++)
		for (i = 0; i < cin; i++)
			for (k = 0; k < 3; k++)
				t[((size_t)k * cin + i) * cout + o] =
				    w[((size_t)o * cin + i) * 3 + k];
	return t;
}

static int
tensor(const struct gguf *g, const char *name, int n_dims, int64_t d0,
    int64_t d1, int64_t d2, const float **ret, char *err)
{
	const int64_t dims[3] = { d0, d1, d2 };

	return gguf_expect_f32(g, name, n_dims, dims, ret, err);
}

static const struct gguf_want_u32 meta_keys[] = {
	{ "silero.sample_rate", SOTTO_SAMPLE_RATE },
	{ "silero.chunk", SOTTO_VAD_CHUNK },
	{ "silero.context", VAD_CONTEXT },
	{ "silero.n_fft", VAD_N_FFT },
	{ "silero.hop", VAD_HOP },
	{ "silero.hidden", VAD_HIDDEN },
};

static const struct gguf_kind kind = {
	.arch = "silero-vad",
	.what = "Silero VAD",
	.runs = "16 kHz Silero VAD v5/v6",
	.fetch_name = "silero-vad",
	.keys = meta_keys,
	.n_keys = sizeof(meta_keys) / sizeof(meta_keys[0]),
};

/* The convolutions' weights, transposed into v. */
static int
bind_convs(struct sotto_vad *v, const struct gguf *g, char *err)
{
	const float *w, *b;
	char name[32];
	int l, rc;

	for (l = 0; l < VAD_N_CONV; l++) {
		const struct vad_conv_dims *d = &conv_dims[l];

		snprintf(name, sizeof(name), "vad.enc.%d.w", l);
		if ((rc = tensor(g, name, 3, d->cout, d->cin, 3, &w, err)))
			return rc;
		snprintf(name, sizeof(name), "vad.enc.%d.b", l);
		if ((rc = tensor(g, name, 1, d->cout, 0, 0, &b, err)))
			return rc;
		if ((v->conv_w[l] = conv_weight(w, d->cin, d->cout)) == NULL ||
		    (v->conv_b[l] = malloc(d->cout * sizeof(float))) == NULL)
			return err_set(err, SOTTO_ENOMEM, "out of memory");
		memcpy(v->conv_b[l], b, d->cout * sizeof(float));
	}
	return 0;
}

/* The LSTM as one product over [x; h]: [2 * hidden][4 * hidden]. */
static int
bind_lstm(struct sotto_vad *v, const struct gguf *g, char *err)
{
	const int n = 4 * VAD_HIDDEN;
	const float *wih, *whh, *bih, *bhh, *hw, *hb;
	float *t;
	int i, rc;

	if ((rc = tensor(g, "vad.lstm.w_ih", 2, n, VAD_HIDDEN, 0, &wih,
	    err)) || (rc = tensor(g, "vad.lstm.w_hh", 2, n, VAD_HIDDEN, 0,
	    &whh, err)) || (rc = tensor(g, "vad.lstm.b_ih", 1, n, 0, 0, &bih,
	    err)) || (rc = tensor(g, "vad.lstm.b_hh", 1, n, 0, 0, &bhh,
	    err)) || (rc = tensor(g, "vad.head.w", 1, VAD_HIDDEN, 0, 0, &hw,
	    err)) || (rc = tensor(g, "vad.head.b", 1, 1, 0, 0, &hb, err)))
		return rc;
	v->lstm_w = malloc((size_t)2 * VAD_HIDDEN * n * sizeof(float));
	if (v->lstm_w == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if ((t = transpose(wih, n, VAD_HIDDEN)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memcpy(v->lstm_w, t, (size_t)VAD_HIDDEN * n * sizeof(float));
	free(t);
	if ((t = transpose(whh, n, VAD_HIDDEN)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	memcpy(v->lstm_w + (size_t)VAD_HIDDEN * n, t,
	    (size_t)VAD_HIDDEN * n * sizeof(float));
	free(t);
	for (i = 0; i < n; i++)
		v->lstm_b[i] = bih[i] + bhh[i];
	memcpy(v->head_w, hw, sizeof(v->head_w));
	v->head_b = hb[0];
	return 0;
}

static int
bind(struct sotto_vad *v, const struct gguf *g, char *err)
{
	const float *basis;
	int rc;

	if ((rc = gguf_check_kind(g, &kind, err)) != 0 ||
	    (rc = tensor(g, "vad.stft.basis", 2, 2 * VAD_N_FREQ, VAD_N_FFT, 0,
	    &basis, err)) != 0)
		return rc;
	if ((v->basis = transpose(basis, 2 * VAD_N_FREQ, VAD_N_FFT)) == NULL)
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	if ((rc = bind_convs(v, g, err)) != 0)
		return rc;
	return bind_lstm(v, g, err);
}

int
sotto_vad_load(const char *path, struct sotto_vad **ret, char *err)
{
	struct sotto_vad *v;
	struct gguf *g;
	int rc;

	*ret = NULL;
	if ((rc = gguf_open(path, &g, err)) != 0)
		return rc;
	if ((v = calloc(1, sizeof(*v))) == NULL) {
		gguf_close(g);
		return err_set(err, SOTTO_ENOMEM, "out of memory");
	}
	rc = bind(v, g, err);
	gguf_close(g);
	if (rc != 0) {
		sotto_vad_free(v);
		return rc;
	}
	*ret = v;
	return 0;
}

void
sotto_vad_free(struct sotto_vad *v)
{
	int l;

	if (v == NULL)
		return;
	free(v->basis);
	for (l = 0; l < VAD_N_CONV; l++) {
		free(v->conv_w[l]);
		free(v->conv_b[l]);
	}
	free(v->lstm_w);
	free(v);
}

struct sotto_vad_state *
sotto_vad_state_new(const struct sotto_vad *v)
{
	struct sotto_vad_state *s = calloc(1, sizeof(*s));

	if (s != NULL)
		s->vad = v;
	return s;
}

void
sotto_vad_state_free(struct sotto_vad_state *s)
{
	free(s);
}

void
sotto_vad_reset(struct sotto_vad_state *s)
{
	memset(s->h, 0, sizeof(s->h));
	memset(s->c, 0, sizeof(s->c));
	memset(s->context, 0, sizeof(s->context));
}

/* [context | chunk] reflect-padded, STFT, magnitude: s->x[4][129]. */
static void
stft(struct sotto_vad_state *s, const float *pcm)
{
	const int n = VAD_CONTEXT + SOTTO_VAD_CHUNK;
	float *in = s->in, *spec = s->spec;
	int t, f, j;

	memcpy(in, s->context, VAD_CONTEXT * sizeof(float));
	memcpy(in + VAD_CONTEXT, pcm, SOTTO_VAD_CHUNK * sizeof(float));
	for (j = 1; j <= VAD_PAD; j++)
		in[n - 1 + j] = in[n - 1 - j];
	memset(spec, 0, sizeof(s->spec));
	for (t = 0; t < VAD_N_FRAMES; t++)
		matvec_t(s->vad->basis, in + t * VAD_HOP, VAD_N_FFT,
		    2 * VAD_N_FREQ, spec + t * 2 * VAD_N_FREQ);
	for (t = 0; t < VAD_N_FRAMES; t++)
		for (f = 0; f < VAD_N_FREQ; f++) {
			float re = spec[t * 2 * VAD_N_FREQ + f];
			float im = spec[t * 2 * VAD_N_FREQ + VAD_N_FREQ + f];

			s->x[t * VAD_N_FREQ + f] = sqrtf(re * re + im * im);
		}
	memcpy(s->context, pcm + SOTTO_VAD_CHUNK - VAD_CONTEXT,
	    VAD_CONTEXT * sizeof(float));
}

/*
 * One conv1d (kernel 3, padding 1) with ReLU over x[t_in][cin] into
 * y[t_out][cout]; returns t_out.
 */
static int
conv(const struct sotto_vad *v, int l, const float *x, int t_in, float *y)
{
	const struct vad_conv_dims *d = &conv_dims[l];
	int t_out = (t_in - 1) / d->stride + 1, t, k, c, at;

	for (t = 0; t < t_out; t++) {
		float *out = y + t * d->cout;

		memcpy(out, v->conv_b[l], d->cout * sizeof(float));
		for (k = 0; k < 3; k++) {
			at = t * d->stride + k - 1;
			if (at < 0 || at >= t_in)
				continue;
			matvec_t(v->conv_w[l] + (size_t)k * d->cin * d->cout,
			    x + at * d->cin, d->cin, d->cout, out);
		}
		for (c = 0; c < d->cout; c++)
			out[c] = out[c] > 0.0f ? out[c] : 0.0f;
	}
	return t_out;
}

static float
sigmoid(float x)
{
	return 1.0f / (1.0f + expf(-x));
}

/* The LSTM cell on the encoder's output x[hidden]; then the head. */
static float
lstm_head(struct sotto_vad_state *s, const float *x)
{
	const struct sotto_vad *v = s->vad;
	const int H = VAD_HIDDEN;
	float *g = s->gates, logit = v->head_b;
	int j;

	memcpy(g, v->lstm_b, sizeof(v->lstm_b));
	matvec_t(v->lstm_w, x, H, 4 * H, g);
	matvec_t(v->lstm_w + (size_t)H * 4 * H, s->h, H, 4 * H, g);
	for (j = 0; j < H; j++) {
		float i = sigmoid(g[j]), f = sigmoid(g[H + j]);
		float c = tanhf(g[2 * H + j]), o = sigmoid(g[3 * H + j]);

		s->c[j] = f * s->c[j] + i * c;
		s->h[j] = o * tanhf(s->c[j]);
		if (s->h[j] > 0.0f)
			logit += v->head_w[j] * s->h[j];
	}
	return sigmoid(logit);
}

float
sotto_vad_chunk(struct sotto_vad_state *s, const float *pcm)
{
	const struct sotto_vad *v = s->vad;
	int t;

	stft(s, pcm);
	t = conv(v, 0, s->x, VAD_N_FRAMES, s->y);
	t = conv(v, 1, s->y, t, s->x);
	t = conv(v, 2, s->x, t, s->y);
	t = conv(v, 3, s->y, t, s->x);
	return lstm_head(s, s->x);
}

size_t
sotto_vad_probs(struct sotto_vad_state *s, const float *pcm, size_t n,
    float *probs)
{
	float last[SOTTO_VAD_CHUNK];
	size_t i, k = 0;

	for (i = 0; i + SOTTO_VAD_CHUNK <= n; i += SOTTO_VAD_CHUNK)
		probs[k++] = sotto_vad_chunk(s, pcm + i);
	if (i < n) {
		memset(last, 0, sizeof(last));
		memcpy(last, pcm + i, (n - i) * sizeof(float));
		probs[k++] = sotto_vad_chunk(s, last);
	}
	return k;
}
