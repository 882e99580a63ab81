/*
 * sotto-bench: time the engine's parts on one model, for bench/run.
 *
 *   sotto-bench MODEL [--load-only] [--precision auto|fp32|bf16|int8]
 *               [--threads N] [--runs N] [--step-rounds N]
 *               [--file RAW [--tokens N]]
 *
 * Prints one JSON object: load time, encoder time per 30 s window, and
 * the time of one cached-token decoder step for 1 and 5 beams (medians
 * of 100 steps; with --step-rounds N, the least of N such medians: on a
 * shared machine other work only ever adds time, and it comes and goes
 * over seconds, longer than one round);
 * the resident memory after the load, its peak during the load and the
 * peak of the whole run (VmRSS, VmHWM); at bf16, the bf16 matmul
 * ceiling and the kernel that reached it ("amx" or "avx512-bf16"; null
 * at the other precisions). --load-only: the load alone.
 * --file: the fixed-token file instead (bench_file below; RAW is 16 kHz
 * s16le mono): N tokens per 30 s window [100], times and peak RSS.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "decode.h"
#include "gemm.h"
#include "model.h"
#include "omp-env.h"
#include "tokenizer.h"

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static int
bench_encoder(struct sotto_state *st, int runs, double *ret)
{
	size_t n = (size_t)st->model->hp.n_mels * WHISPER_N_FRAMES, i;
	double t[64];
	float *mel = malloc(n * sizeof(float));
	char err[SOTTO_ERR_MAX];
	int r;

	if (mel == NULL)
		return -1;
	for (i = 0; i < n; i++)
		mel[i] = sinf((float)i * 0.001f) * 0.5f;
	for (r = 0; r < runs + 1; r++) {
		double t0 = now();

		if (sotto_encode(st, mel, NULL, err) != 0) {
			fprintf(stderr, "sotto-bench: %s\n", err);
			free(mel);
			return -1;
		}
		if (r > 0)
			t[r - 1] = now() - t0;
	}
	free(mel);
	*ret = median(t, runs);
	return 0;
}

static const char *
precision_name(const struct sotto_model *m)
{
	return m->int8 || m->int8_avx2 ? "int8" :
	    m->precision == SOTTO_PRECISION_BF16 ?
	    "bf16" : "fp32";
}

/* VmRSS or VmHWM ("VmRSS:", "VmHWM:") of this process in MB, or -1. */
static double
status_mb(const char *key)
{
	char line[256];
	double kb = -1.0;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1.0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, key, strlen(key)) == 0)
			kb = atof(line + strlen(key));
	fclose(f);
	return kb < 0 ? -1.0 : kb / 1024.0;
}

/* FLOPs of one encoder pass (multiply-adds count 2). */
static double
encoder_flops(const struct hparams *hp)
{
	double d = hp->n_audio_state, s = WHISPER_N_AUDIO_CTX;
	double f = 2.0 * d * 3 * hp->n_mels * WHISPER_N_FRAMES +
	    2.0 * d * 3 * d * s;

	f += hp->n_audio_layer * (2.0 * 4 * d * d * s +	/* q k v o */
	    2.0 * 2 * s * s * d +			/* scores, values */
	    2.0 * 2 * 4 * d * d * s);			/* mlp */
	return f;
}

/* Median TFLOP/s of 10 runs (after one warm-up) of the product m x k x n. */
static double
product_tflops(struct gemm *g, const struct mat *w, const uint16_t *x16,
    const float *x, float *y, int m, int k, int n, int win)
{
	char err[SOTTO_ERR_MAX];
	double t[11];
	int r, rc;

	for (r = 0; r < 11; r++) {
		double t0 = now();

		if (win)
			rc = gemm_linear(g, w, x, n, n, y, WHISPER_AUDIO_LD,
			    NULL, 0, err);
		else	/* token-major, oneDNN's fast form: Y^T = X^T W^T */
			rc = gemm_bf16(g, n, m, k, x16, k, 1, w->bf16, 1, k, y,
			    m, err);
		if (rc != 0)
			return 0.0;
		t[r] = now() - t0;
	}
	return 2.0 * m * n * k / median(t + 1, 10) / 1e12;
}

/*
 * The bf16 matmul ceiling on encoder-shaped products ([3d x d], [4d x d],
 * [d x 4d] by 1500): the best TFLOP/s of oneDNN in its fastest form
 * (activations token-major) and of sotto's window kernel, AMX or
 * AVX512-BF16 (channels-first, as the encoder runs it).
 */
static void
matmul_ceiling(const struct sotto_model *m, double *onednn, double *win)
{
	int d = m->hp.n_audio_state, i;
	int shapes[3][2] = { { 3 * d, d }, { 4 * d, d }, { d, 4 * d } };
	uint16_t *f16 = calloc((size_t)4 * d * 4 * d, 2);
	uint16_t *x16 = calloc((size_t)4 * d * 1500, 2);
	float *x = calloc((size_t)4 * d * 1500, 4);
	float *y = aligned_alloc(64, (size_t)4 * d * WHISPER_AUDIO_LD * 4);
	char err[SOTTO_ERR_MAX];

	*onednn = *win = 0.0;
	for (i = 0; f16 != NULL && x16 != NULL && x != NULL && y != NULL &&
	    i < 3; i++) {
		int rows = shapes[i][0], k = shapes[i][1];
		struct mat w;
		double tf;

		if (mat_init_f16(&w, m->gemm, f16, rows, k, err) != 0)
			break;
		tf = product_tflops(m->gemm, &w, x16, x, y, rows, k, 1500, 0);
		*onednn = tf > *onednn ? tf : *onednn;
		if (mat_pack(&w, m->gemm, 1, err) == 0) {
			tf = product_tflops(m->gemm, &w, x16, x, y, rows, k,
			    1500, 1);
			*win = tf > *win ? tf : *win;
		}
		mat_free(&w);
	}
	free(f16);
	free(x16);
	free(x);
	free(y);
}

/* Median time of one cached-token step with n_beams beams. */
static int
bench_steps(struct sotto_state *st, int n_beams, int steps, double *ret)
{
	const struct tok_specials *sp = tok_specials(st->model->tok);
	int32_t prompt[4] = { sp->sot }, tok[16];
	int row = 0, i, b;
	double t[256];
	char err[SOTTO_ERR_MAX];

	if (decoder_reserve(st, n_beams, err) != 0 ||
	    decoder_prefill(st, prompt, 1, &row, 1, st->logits, err) != 0)
		goto fail;
	decoder_fork(st, n_beams);
	for (b = 0; b < n_beams; b++)
		tok[b] = sp->timestamp_begin;
	for (i = 0; i < steps; i++) {
		double t0 = now();

		if (decoder_step(st, tok, n_beams, st->logits, err) != 0)
			goto fail;
		t[i] = now() - t0;
		for (b = 0; b < n_beams; b++)
			tok[b] = 220 + (i * 7 + b) % 1000;
	}
	*ret = median(t, steps);
	return 0;
fail:
	fprintf(stderr, "sotto-bench: %s\n", err);
	return -1;
}

/* The least of rounds medians of bench_steps. */
static int
least_steps(struct sotto_state *st, int n_beams, int rounds, double *ret)
{
	double t;
	int r;

	*ret = INFINITY;
	for (r = 0; r < rounds; r++) {
		if (bench_steps(st, n_beams, 100, &t) != 0)
			return -1;
		*ret = t < *ret ? t : *ret;
	}
	return 0;
}

/* Argmax of logits over the text tokens (ids below end-of-text). */
static int32_t
text_argmax(const float *logits, int32_t eot)
{
	int32_t i, best = 0;

	for (i = 1; i < eot; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

/* raw 16 kHz s16le mono -> float; NULL on failure (message printed). */
static float *
read_raw(const char *path, size_t *ret_n)
{
	FILE *f = fopen(path, "rb");
	int16_t *s = NULL;
	float *pcm = NULL;
	long len;
	size_t i, n = 0;

	if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		n = (size_t)len / 2;
		s = malloc(n * 2);
		pcm = malloc(n * sizeof(float));
		if (s == NULL || pcm == NULL || fread(s, 2, n, f) != n) {
			free(pcm);
			pcm = NULL;
		}
		for (i = 0; pcm != NULL && i < n; i++)
			pcm[i] = s[i] / 32768.0f;
	}
	if (pcm == NULL)
		fprintf(stderr, "sotto-bench: %s: cannot read it as raw "
		    "s16le samples\n", path);
	if (f != NULL)
		fclose(f);
	free(s);
	*ret_n = n;
	return pcm;
}

/*
 * The fixed-token file (bench/run, docs/benchmarks.md): the log-mel of
 * the whole file, then per 30 s window the encoder, the SOT sequence
 * (English, transcribe, no timestamps) and n_tokens greedy steps over
 * the text tokens only, so that every tool does the same work whatever
 * the weights' values. Times are summed over the windows.
 */
static int
bench_file(struct sotto_state *st, const char *raw, int n_tokens,
    double *t_mel, double *t_enc, double *t_dec, int *ret_windows)
{
	const struct sotto_model *m = st->model;
	int32_t prompt[4], tok, eot = tok_specials(m->tok)->eot;
	size_t n, frames, w, nw, r, nm = m->hp.n_mels, F = WHISPER_N_FRAMES;
	float *pcm = read_raw(raw, &n), *mel = NULL, *win = NULL;
	char err[SOTTO_ERR_MAX] = "";
	int np, row, i, rc = -1;
	double t0;

	*t_mel = *t_enc = *t_dec = 0.0;
	nw = (n + WHISPER_N_SAMPLES - 1) / WHISPER_N_SAMPLES;
	frames = (nw + 1) * F;		/* openai pads 30 s of zeros */
	if (pcm == NULL || (pcm = realloc(pcm, frames * WHISPER_HOP *
	    sizeof(float))) == NULL)
		goto out;
	memset(pcm + n, 0, (frames * WHISPER_HOP - n) * sizeof(float));
	mel = malloc(nm * frames * sizeof(float));
	win = malloc(nm * F * sizeof(float));
	if (mel == NULL || win == NULL || n_tokens + 4 > m->hp.n_text_ctx)
		goto out;
	t0 = now();
	if (sotto_log_mel(m, pcm, frames * WHISPER_HOP, mel, frames,
	    err) != 0)
		goto out;
	*t_mel = now() - t0;
	if ((np = sotto_sot_sequence(m, NULL, SOTTO_TASK_TRANSCRIBE, 1,
	    prompt, err)) < 0)
		goto out;
	for (w = 0; w < nw; w++) {
		for (r = 0; r < nm; r++)
			memcpy(win + r * F, mel + r * frames + w * F,
			    F * sizeof(float));
		t0 = now();
		if (sotto_encode(st, win, NULL, err) != 0)
			goto out;
		*t_enc += now() - t0;
		t0 = now();
		row = np - 1;
		if (decoder_prefill(st, prompt, np, &row, 1, st->logits,
		    err) != 0)
			goto out;
		for (i = 0; i < n_tokens; i++) {
			tok = text_argmax(st->logits, eot);
			if (decoder_step(st, &tok, 1, st->logits, err) != 0)
				goto out;
		}
		*t_dec += now() - t0;
	}
	*ret_windows = (int)nw;
	rc = 0;
out:
	if (rc != 0 && err[0] != '\0')
		fprintf(stderr, "sotto-bench: %s\n", err);
	else if (rc != 0)
		fprintf(stderr, "sotto-bench: %s: out of memory, or more than "
		    "%d tokens\n", raw, m->hp.n_text_ctx - 4);
	free(pcm);
	free(mel);
	free(win);
	return rc;
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: sotto-bench MODEL [--load-only] [--precision "
	    "auto|fp32|bf16|int8]\n"
	    "         [--threads N] [--runs N (1-63, 5)] [--step-rounds N "
	    "(1-100, 1)]\n"
	    "         [--file RAW [--tokens N (100)]]\n"
	    "Times MODEL's load, encoder window and decoder steps (greedy and "
	    "5 beams),\nor with --file a 16 kHz s16 file at N tokens per "
	    "window; prints one JSON line.\n");
}

/* Exit status 2 with what is wrong with opt. */
static int
bad_arg(const char *opt, const char *why)
{
	fprintf(stderr, "sotto-bench: %s %s\n", opt, why);
	return 2;
}

static int
number(const char *opt, const char *val, int lo, int hi, int *ret)
{
	char *end;
	long v = strtol(val, &end, 10);

	if (*val == '\0' || *end != '\0' || v < lo || v > hi) {
		fprintf(stderr, "sotto-bench: %s takes a whole number from %d "
		    "to %d, not '%s'\n", opt, lo, hi, val);
		return 2;
	}
	*ret = (int)v;
	return 0;
}

static int
precision(const char *val, enum sotto_precision *ret)
{
	static const struct {
		const char *name;
		enum sotto_precision p;
	} names[] = { { "auto", SOTTO_PRECISION_AUTO },
	    { "fp32", SOTTO_PRECISION_FP32 }, { "bf16", SOTTO_PRECISION_BF16 },
	    { "int8", SOTTO_PRECISION_INT8 } };
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (strcmp(val, names[i].name) == 0) {
			*ret = names[i].p;
			return 0;
		}
	return bad_arg(val, "is not a precision (auto, fp32, bf16, int8)");
}

int
main(int argc, char **argv)
{
	struct sotto_model_params mp;
	struct sotto_model *m;
	struct sotto_model_info info;
	struct sotto_state *st;
	char err[SOTTO_ERR_MAX];
	double t0, load, load_rss, load_hwm, enc, step1, step5;
	double onednn = 0.0, win = 0.0, t_start = now();
	const char *file = NULL;
	int i, rc = 0, runs = 5, step_rounds = 1, load_only = 0, tokens = 100;
	int windows;

	omp_env_reexec(argv, OMP_WAIT_SPIN);	/* as sotto transcribe */
	sotto_model_params_init(&mp);
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	if (argc < 2 || argv[1][0] == '-')
		return usage(stderr), 2;
	for (i = 2; i < argc; i++) {
		const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] :
		    NULL;

		if (strcmp(opt, "--load-only") == 0) {
			load_only = 1;
			continue;
		}
		if (val == NULL)
			return bad_arg(opt, "needs a value");
		i++;
		if (strcmp(opt, "--threads") == 0)
			rc = number(opt, val, 1, 1024, &mp.threads);
		else if (strcmp(opt, "--runs") == 0)
			rc = number(opt, val, 1, 63, &runs);
		else if (strcmp(opt, "--step-rounds") == 0)
			rc = number(opt, val, 1, 100, &step_rounds);
		else if (strcmp(opt, "--tokens") == 0)
			rc = number(opt, val, 1, 100000, &tokens);
		else if (strcmp(opt, "--file") == 0)
			file = val;
		else if (strcmp(opt, "--precision") == 0)
			rc = precision(val, &mp.precision);
		else
			rc = bad_arg(opt, "is not an option (--help lists them)");
		if (rc != 0)
			return rc;
	}
	t0 = now();
	if (sotto_model_load(argv[1], &mp, &m, err) != 0) {
		fprintf(stderr, "sotto-bench: %s\n", err);
		return 3;
	}
	load = now() - t0;
	load_rss = status_mb("VmRSS:");
	load_hwm = status_mb("VmHWM:");
	if (load_only) {
		printf("{\"model\":\"%s\",\"load_s\":%.4f,"
		    "\"load_rss_mb\":%.1f,\"load_peak_rss_mb\":%.1f}\n",
		    m->name, load, load_rss, load_hwm);
		sotto_model_free(m);
		return 0;
	}
	if ((st = sotto_state_new(m)) == NULL)
		return 1;
	if (file != NULL) {
		double mel, dec, wall;

		if (bench_file(st, file, tokens, &mel, &enc, &dec,
		    &windows) != 0)
			return 1;
		wall = now() - t_start;
		printf("{\"model\":\"%s\",\"precision\":\"%s\","
		    "\"threads\":%d,\"load_s\":%.4f,\"mel_s\":%.4f,"
		    "\"windows\":%d,\"tokens_per_window\":%d,"
		    "\"encoder_s\":%.4f,\"decode_s\":%.4f,"
		    "\"wall_s\":%.4f,\"peak_rss_mb\":%.1f}\n", m->name,
		    precision_name(m),
		    m->threads, load, mel, windows, tokens, enc, dec, wall,
		    status_mb("VmHWM:"));
		sotto_state_free(st);
		sotto_model_free(m);
		return 0;
	}
	if (bench_encoder(st, runs, &enc) != 0 ||
	    least_steps(st, 1, step_rounds, &step1) != 0 ||
	    least_steps(st, 5, step_rounds, &step5) != 0)
		return 1;
	if (m->precision == SOTTO_PRECISION_BF16)
		matmul_ceiling(m, &onednn, &win);
	sotto_model_info(m, &info);
	printf("{\"model\":\"%s\",\"precision\":\"%s\",\"compute\":\"%s\","
	    "\"threads\":%d,"
	    "\"load_s\":%.4f,\"encoder_s\":%.4f,\"step1_ms\":%.3f,"
	    "\"step5_ms\":%.3f,\"encoder_gflop\":%.2f,"
	    "\"encoder_tflops\":%.3f,\"matmul_ceiling_tflops\":%.3f,"
	    "\"matmul_onednn_tflops\":%.3f,\"matmul_kernel_tflops\":%.3f,"
	    "\"kernel\":%s,\"load_rss_mb\":%.1f,"
	    "\"load_peak_rss_mb\":%.1f,\"peak_rss_mb\":%.1f}\n",
	    m->name, precision_name(m), info.compute,
	    m->threads, load, enc, step1 * 1e3, step5 * 1e3,
	    encoder_flops(&m->hp) / 1e9, encoder_flops(&m->hp) / enc / 1e12,
	    onednn > win ? onednn : win, onednn, win,
	    m->precision != SOTTO_PRECISION_BF16 ? "null" :
	    gemm_has_amx(m->gemm) ? "\"amx\"" : "\"avx512-bf16\"", load_rss,
	    load_hwm,
	    status_mb("VmHWM:"));
	sotto_state_free(st);
	sotto_model_free(m);
	return 0;
}
