/*
 * whispercpp-file: whisper.cpp's side of bench/run's fixed-token file,
 * built by bench/whispercpp.py against the whisper.cpp it builds (never
 * by meson: it needs whisper.h and whisper.cpp's libraries).
 *
 *   whispercpp-file MODEL RAW TOKENS THREADS [nfa]
 *
 * The same work as `sotto-bench MODEL --file RAW --tokens TOKENS`: the
 * log-mel of the whole file (16 kHz s16le mono), then per 30 s window
 * the encoder, the SOT sequence (English, transcribe, no timestamps) in
 * one decoder call and TOKENS single-token decoder calls, each token the
 * argmax of the previous logits over the text tokens (ids below
 * end-of-text), through whisper.h's own entry points (whisper_encode,
 * whisper_decode). Flash attention as whisper.cpp's default, or off with
 * "nfa". Prints one JSON object.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "whisper.h"

#define SAMPLES_PER_WINDOW	480000
#define FRAMES_PER_WINDOW	3000

static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double
peak_rss_mb(void)
{
	char line[256];
	double kb = -1.0;
	FILE *f = fopen("/proc/self/status", "r");

	if (f == NULL)
		return -1.0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strncmp(line, "VmHWM:", 6) == 0)
			kb = atof(line + 6);
	fclose(f);
	return kb / 1024.0;
}

static float *
read_raw(const char *path, int *ret_n)
{
	FILE *f = fopen(path, "rb");
	short *s = NULL;
	float *pcm = NULL;
	long len = 0, i;

	if (f != NULL && fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) > 0 &&
	    fseek(f, 0, SEEK_SET) == 0) {
		len /= 2;
		s = malloc(len * sizeof(*s));
		pcm = malloc(len * sizeof(*pcm));
		if (s == NULL || pcm == NULL ||
		    fread(s, 2, len, f) != (size_t)len) {
			free(pcm);
			pcm = NULL;
		}
		for (i = 0; pcm != NULL && i < len; i++)
			pcm[i] = s[i] / 32768.0f;
	}
	if (f != NULL)
		fclose(f);
	free(s);
	*ret_n = (int)len;
	return pcm;
}

static whisper_token
text_argmax(const float *logits, whisper_token eot)
{
	whisper_token i, best = 0;

	for (i = 1; i < eot; i++)
		if (logits[i] > logits[best])
			best = i;
	return best;
}

int
main(int argc, char **argv)
{
	struct whisper_context_params cp = whisper_context_default_params();
	struct whisper_context *ctx;
	double t0 = now(), t, load, mel, enc = 0.0, dec = 0.0;
	whisper_token prompt[4], tok, eot;
	int n, np = 0, w, nw, i, tokens, threads;
	float *pcm;

	if (argc < 5) {
		fprintf(stderr, "usage: whispercpp-file MODEL RAW TOKENS "
		    "THREADS [nfa]\n");
		return 2;
	}
	tokens = atoi(argv[3]);
	threads = atoi(argv[4]);
	cp.use_gpu = false;
	if (argc > 5 && strcmp(argv[5], "nfa") == 0)
		cp.flash_attn = false;
	if ((ctx = whisper_init_from_file_with_params(argv[1], cp)) == NULL)
		return 3;
	load = now() - t0;
	if ((pcm = read_raw(argv[2], &n)) == NULL) {
		fprintf(stderr, "whispercpp-file: %s: cannot read it\n",
		    argv[2]);
		return 1;
	}
	eot = whisper_token_eot(ctx);
	prompt[np++] = whisper_token_sot(ctx);
	if (whisper_is_multilingual(ctx)) {
		prompt[np++] = whisper_token_lang(ctx, whisper_lang_id("en"));
		prompt[np++] = whisper_token_transcribe(ctx);
	}
	prompt[np++] = whisper_token_not(ctx);
	t = now();
	if (whisper_pcm_to_mel(ctx, pcm, n, threads) != 0)
		return 1;
	mel = now() - t;
	nw = (n + SAMPLES_PER_WINDOW - 1) / SAMPLES_PER_WINDOW;
	for (w = 0; w < nw; w++) {
		t = now();
		if (whisper_encode(ctx, w * FRAMES_PER_WINDOW, threads) != 0)
			return 1;
		enc += now() - t;
		t = now();
		if (whisper_decode(ctx, prompt, np, 0, threads) != 0)
			return 1;
		for (i = 0; i < tokens; i++) {
			/* the prompt's logits: its last row */
			tok = text_argmax(whisper_get_logits(ctx) + (i == 0 ?
			    (size_t)(np - 1) * whisper_n_vocab(ctx) : 0), eot);
			if (whisper_decode(ctx, &tok, 1, np + i, threads) != 0)
				return 1;
		}
		dec += now() - t;
	}
	printf("{\"threads\":%d,\"flash_attn\":%s,\"load_s\":%.4f,"
	    "\"mel_s\":%.4f,\"windows\":%d,\"tokens_per_window\":%d,"
	    "\"encoder_s\":%.4f,\"decode_s\":%.4f,\"wall_s\":%.4f,"
	    "\"peak_rss_mb\":%.1f}\n", threads, cp.flash_attn ? "true" :
	    "false", load, mel, nw, tokens, enc, dec, now() - t0,
	    peak_rss_mb());
	whisper_free(ctx);
	free(pcm);
	return 0;
}
