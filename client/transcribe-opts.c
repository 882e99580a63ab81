/*
 * sotto transcribe's options: --help, and the command line checked and
 * read into struct transcribe_opts before anything is loaded.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "transcribe.h"

static const char usage_text[] =
"usage: sotto transcribe [OPTIONS] FILE|-...\n"
"\n"
"Transcribe audio files (wav, flac, ogg, opus, mp3 through libsndfile;\n"
"m4a, mp4, webm, mkv, mpeg through FFmpeg; any rate and channel count)\n"
"with a Whisper model. '-' is standard input: redirected from a file,\n"
"any of these; from a pipe, what libsndfile reads from one (wav, ogg,\n"
"mp3), or raw PCM with --raw-format, --rate and --channels, as for\n"
"'sotto stream -'. A file is read twice and held one 30 s window at a\n"
"time; a pipe is held whole in memory (230 MB per hour).\n"
"\n"
"  -m, --model NAME|PATH     model name (NAME.gguf in $SOTTO_MODEL_DIR,\n"
"                            ./models or " SOTTO_MODELDIR ";\n"
"                            see sotto-fetch-model) or .gguf path [tiny.en]\n"
"  -l, --language CODE|auto  spoken language [en for .en models, else auto]\n"
"      --task transcribe|translate   translate into English [transcribe]\n"
"  -f, --format FORMAT       output format [txt]: txt (a line per\n"
"                            segment), json, srt, vtt, tsv (openai-whisper's:\n"
"                            start and end in ms, text), lrc (lyrics,\n"
"                            [mm:ss.xx]text), or all (with --output-dir: a\n"
"                            file in each format)\n"
"  -o, --output FILE         write to FILE instead of standard output;\n"
"                            several inputs go one after the other (txt\n"
"                            with a '==> FILE <==' line before each, json\n"
"                            a line each, the others each file's in turn);\n"
"                            a format's name (whisper.cpp's -osrt) is\n"
"                            refused: -f srt\n"
"      --output-dir DIR      one file per input in DIR, named after it:\n"
"                            DIR/NAME.FORMAT for NAME.wav\n"
"      --raw-format s16le|f32le  '-' is raw PCM of these samples [s16le\n"
"                            with --rate or --channels; without any of the\n"
"                            three, its header tells its format]\n"
"      --rate N              raw standard input's rate [16000]\n"
"      --channels N          raw standard input's channels [1]\n"
"      --beam-size N         beams at temperature 0; 1 = greedy [5]\n"
"      --best-of N           samples per window at temperature > 0 [5]\n"
"      --patience X          beam search patience [1.0]\n"
"      --temperature T       first temperature [0]\n"
"      --temperature-increment X  fallback step; 0 = no fallback [0.2]\n"
"      --no-fallback         same as --temperature-increment 0\n"
"      --prompt TEXT         text to condition the first window on\n"
"      --no-condition        do not condition windows on earlier text\n"
"      --no-timestamps       decode without timestamp tokens\n"
"      --silence-threshold DB  skip 30 s windows whose RMS level is below\n"
"                            DB dBFS without decoding them (Whisper invents\n"
"                            text on digital silence); -200 = off [-60]\n";

static const char usage_tail[] =
"      --word-timestamps     a time for every word (openai's method: the\n"
"                            alignment heads' cross-attention and dynamic\n"
"                            time warping); segments take their words' times\n"
"      --max-line-width N    srt/vtt with words: at most N characters a line\n"
"      --max-line-count N    srt/vtt with words and --max-line-width: at\n"
"                            most N lines a cue (else a cue is a segment)\n"
"      --highlight-words     srt/vtt with words: a cue per word, underlined\n"
"      --precision auto|fp32|bf16|int8  compute precision [auto: bf16 on\n"
"                            CPUs with AMX or AVX512-BF16, else int8 on\n"
"                            AVX2, else fp32];\n"
"                            int8: bf16 with the products' weights in int8\n"
"                            (on AVX2 only: fp32, the decoder's in int8),\n"
"                            faster, slightly less exact\n"
"  -t, --threads N           compute threads [all cores]; running several\n"
"                            jobs at once, give each -t 1 (idle threads\n"
"                            spin briefly, which costs a shared core)\n"
"  -q, --quiet               no progress on standard error\n"
"  -h, --help                show this help\n"
"\n"
"json writes one object per file per line: file, language, duration,\n"
"text and segments (id, start, end, text, tokens, avg_logprob,\n"
"no_speech_prob, temperature, compression_ratio, and with\n"
"--word-timestamps words: word, start, end, probability; with --diarize\n"
"speaker on segments and words).\n"
"\n"
"Exit status: 0 all files transcribed; 1 some input could not be read\n"
"or transcribed (the others still are; a file cut short is transcribed\n"
"as far as it can be read; one --diarize could not label is written\n"
"without labels), or a transcript could not be written (a\n"
"full disk: the message names the file and why); 2 bad usage; 3 the\n"
"model could not be found or loaded.\n";

enum {
	OPT_TASK = 256, OPT_BEAM, OPT_BEST_OF, OPT_PATIENCE, OPT_TEMP,
	OPT_INC, OPT_NO_FALLBACK, OPT_PROMPT, OPT_NO_COND, OPT_NO_TS,
	OPT_PRECISION, OPT_SILENCE, OPT_WORDS, OPT_LINE_WIDTH, OPT_LINE_COUNT,
	OPT_HIGHLIGHT, OPT_OUTPUT_DIR, OPT_RAW, OPT_RATE, OPT_CHANNELS,
};

static const struct option long_options[] = {
	{ "model", required_argument, NULL, 'm' },
	{ "language", required_argument, NULL, 'l' },
	{ "task", required_argument, NULL, OPT_TASK },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "output-dir", required_argument, NULL, OPT_OUTPUT_DIR },
	{ "raw-format", required_argument, NULL, OPT_RAW },
	{ "rate", required_argument, NULL, OPT_RATE },
	{ "channels", required_argument, NULL, OPT_CHANNELS },
	{ "beam-size", required_argument, NULL, OPT_BEAM },
	{ "best-of", required_argument, NULL, OPT_BEST_OF },
	{ "patience", required_argument, NULL, OPT_PATIENCE },
	{ "temperature", required_argument, NULL, OPT_TEMP },
	{ "temperature-increment", required_argument, NULL, OPT_INC },
	{ "no-fallback", no_argument, NULL, OPT_NO_FALLBACK },
	{ "prompt", required_argument, NULL, OPT_PROMPT },
	{ "no-condition", no_argument, NULL, OPT_NO_COND },
	{ "no-timestamps", no_argument, NULL, OPT_NO_TS },
	{ "precision", required_argument, NULL, OPT_PRECISION },
	{ "silence-threshold", required_argument, NULL, OPT_SILENCE },
	VAD_LONG_OPTIONS,
	DIARIZE_LONG_OPTIONS,
	{ "word-timestamps", no_argument, NULL, OPT_WORDS },
	{ "max-line-width", required_argument, NULL, OPT_LINE_WIDTH },
	{ "max-line-count", required_argument, NULL, OPT_LINE_COUNT },
	{ "highlight-words", no_argument, NULL, OPT_HIGHLIGHT },
	{ "threads", required_argument, NULL, 't' },
	{ "quiet", no_argument, NULL, 'q' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

static int
bad_usage(const char *fmt, const char *arg)
{
	fprintf(stderr, "sotto transcribe: ");
	fprintf(stderr, fmt, arg);
	fprintf(stderr, "\nRun 'sotto transcribe --help' for usage.\n");
	return -1;
}

static int
parse_enum(struct transcribe_opts *o, int c, const char *arg)
{
	if (c == OPT_TASK) {
		if (strcmp(arg, "transcribe") == 0)
			o->tp.task = SOTTO_TASK_TRANSCRIBE;
		else if (strcmp(arg, "translate") == 0)
			o->tp.task = SOTTO_TASK_TRANSLATE;
		else
			return bad_usage("--task must be transcribe or "
			    "translate, not '%s'", arg);
	} else if (c == OPT_PRECISION) {
		if (strcmp(arg, "auto") == 0)
			o->mp.precision = SOTTO_PRECISION_AUTO;
		else if (strcmp(arg, "fp32") == 0)
			o->mp.precision = SOTTO_PRECISION_FP32;
		else if (strcmp(arg, "bf16") == 0)
			o->mp.precision = SOTTO_PRECISION_BF16;
		else if (strcmp(arg, "int8") == 0)
			o->mp.precision = SOTTO_PRECISION_INT8;
		else
			return bad_usage("--precision must be auto, fp32, bf16 "
			    "or int8, not '%s'", arg);
	} else if (c == OPT_RAW) {
		if (strcmp(arg, "s16le") != 0 && strcmp(arg, "f32le") != 0)
			return bad_usage("--raw-format must be s16le or f32le, "
			    "not '%s'", arg);
		o->raw.float32 = strcmp(arg, "f32le") == 0;
		o->raw_set = 1;
	} else if (output_format_parse(arg, &o->format) != 0)
		return bad_usage("--format must be txt, json, srt, vtt, tsv or "
		    "lrc (or all, with --output-dir), not '%s'", arg);
	return 0;
}

/*
 * -o NAME where NAME is an output format: whisper.cpp's -otxt, -osrt,
 * -oj... are output flags there, and here would write a file named
 * "srt". Refused with the option to use instead (-1), else 0.
 */
static int
output_flag_check(const char *arg)
{
	static const char *const ours[][2] = {
		{ "txt", "txt" }, { "json", "json" }, { "srt", "srt" },
		{ "vtt", "vtt" }, { "tsv", "tsv" }, { "lrc", "lrc" },
		{ "all", "all" }, { "j", "json" }, { "jf", "json" },
		{ "csv", "tsv" }, { "wts", "srt" },
	};
	char msg[256];
	size_t i;

	for (i = 0; i < sizeof(ours) / sizeof(ours[0]); i++) {
		if (strcmp(arg, ours[i][0]) != 0)
			continue;
		snprintf(msg, sizeof(msg), "-o %%s names the output file, not "
		    "a format: use -f %s%s (whisper.cpp's -o%s), with -o FILE "
		    "or --output-dir DIR for where it goes; ./%%s is a file "
		    "of that name", ours[i][1], strcmp(ours[i][1], "all") == 0 ?
		    " --output-dir DIR" : "", ours[i][0]);
		fprintf(stderr, "sotto transcribe: ");
		fprintf(stderr, msg, arg, arg);
		fprintf(stderr, "\nRun 'sotto transcribe --help' for usage.\n");
		return -1;
	}
	return 0;
}

static int
parse_number(struct transcribe_opts *o, int c, const char *arg)
{
	int bad = 0;

	switch (c) {
	case OPT_BEAM:
		bad = args_int(arg, 1, 16, &o->tp.beam_size);
		break;
	case OPT_BEST_OF:
		bad = args_int(arg, 1, 16, &o->tp.best_of);
		break;
	case OPT_PATIENCE:
		bad = args_float(arg, 0.1f, 3.0f, &o->tp.patience);
		break;
	case OPT_TEMP:
		bad = args_float(arg, 0.0f, 1.0f, &o->temperature);
		break;
	case OPT_INC:
		bad = args_float(arg, 0.0f, 1.0f, &o->increment);
		break;
	case 't':
		bad = args_int(arg, 1, 1024, &o->mp.threads);
		break;
	case OPT_SILENCE:
		bad = args_float(arg, -200.0f, 0.0f,
		    &o->tp.silence_threshold_db);
		break;
	case OPT_LINE_WIDTH:
		bad = args_int(arg, 1, 100000, &o->out.max_line_width);
		break;
	case OPT_LINE_COUNT:
		bad = args_int(arg, 1, 100000, &o->out.max_line_count);
		break;
	case OPT_RATE:
		bad = args_int(arg, PROTO_RATE_MIN, PROTO_RATE_MAX,
		    &o->raw.rate);
		o->raw_set = 1;
		break;
	case OPT_CHANNELS:
		bad = args_int(arg, 1, PROTO_CHANNELS_MAX, &o->raw.channels);
		o->raw_set = 1;
		break;
	}
	if (bad)
		return bad_usage("bad number '%s' (see --help for ranges)",
		    arg);
	return 0;
}

static int
parse_option(struct transcribe_opts *o, int c, const char *arg)
{
	switch (c) {
	case 'm': o->model = arg; return 0;
	case 'l': o->tp.language = arg; return 0;
	case 'o': o->output = arg; return 0;
	case OPT_OUTPUT_DIR: o->output_dir = arg; return 0;
	case 'q': o->quiet = 1; return 0;
	case OPT_NO_FALLBACK: o->increment = 0.0f; return 0;
	case OPT_PROMPT: o->tp.initial_prompt = arg; return 0;
	case OPT_NO_COND: o->tp.condition_on_previous_text = 0; return 0;
	case OPT_NO_TS: o->tp.without_timestamps = 1; return 0;
	case OPT_WORDS: o->tp.word_timestamps = 1; return 0;
	case OPT_HIGHLIGHT: o->out.highlight_words = 1; return 0;
	case OPT_TASK: case OPT_PRECISION: case 'f': case OPT_RAW:
		return parse_enum(o, c, arg);
	case OPT_BEAM: case OPT_BEST_OF: case OPT_PATIENCE: case OPT_TEMP:
	case OPT_INC: case 't': case OPT_SILENCE: case OPT_LINE_WIDTH:
	case OPT_LINE_COUNT: case OPT_RATE: case OPT_CHANNELS:
		return parse_number(o, c, arg);
	case OPT_VAD: case OPT_VAD_MODEL: case OPT_VAD_THRESHOLD:
	case OPT_VAD_NEG: case OPT_VAD_MIN_SPEECH: case OPT_VAD_MAX_SPEECH:
	case OPT_VAD_MIN_SILENCE: case OPT_VAD_PAD:
		if (vad_opts_parse(&o->vad, c, arg) != 0)
			return bad_usage("bad VAD option value '%s' (see "
			    "--help for ranges)", arg);
		return 0;
	case OPT_DIARIZE: case OPT_SPEAKERS: case OPT_MIN_SPEAKERS:
	case OPT_MAX_SPEAKERS: case OPT_SPEAKER_MODEL:
		if (diarize_opts_parse(&o->diar, c, arg) != 0)
			return bad_usage("bad number of speakers '%s' (1 to "
			    "32)", arg);
		return 0;
	default:
		return bad_usage("%s", "unknown option");
	}
}

/*
 * '-' (standard input) among the inputs: read once, so given once; it
 * has no name for --output-dir; the raw PCM options describe it alone.
 */
static int
stdin_check(const struct transcribe_opts *o, char *const *files, int n)
{
	int i, dashes = 0;

	for (i = 0; i < n; i++)
		dashes += strcmp(files[i], "-") == 0;
	if (dashes > 1)
		return bad_usage("%s", "'-' (standard input) can be read only "
		    "once: give it once");
	if (dashes > 0 && o->output_dir != NULL)
		return bad_usage("%s", "--output-dir names each transcript "
		    "after its input, and '-' (standard input) has no name: "
		    "use -o FILE, or standard output");
	if (dashes == 0 && o->raw_set)
		return bad_usage("%s", "--raw-format, --rate and --channels "
		    "describe raw PCM on standard input: give '-' as the "
		    "input");
	return 0;
}

/* The fallback ladder: T, T + inc, ... up to 1.0. */
static void
set_temperatures(struct transcribe_opts *o)
{
	int n = 0;
	float t;

	for (t = o->temperature; n < MAX_TEMPERATURES; t += o->increment) {
		o->temperatures[n++] = t;
		if (o->increment <= 0.0f || t + o->increment > 1.0f + 1e-6f)
			break;
	}
	o->tp.temperatures = o->temperatures;
	o->tp.n_temperatures = n;
}

int
transcribe_parse(struct transcribe_opts *o, int argc, char **argv)
{
	char msg[256];
	int c;

	memset(o, 0, sizeof(*o));
	o->model = "tiny.en";
	o->increment = 0.2f;
	sotto_model_params_init(&o->mp);
	sotto_transcribe_params_init(&o->tp);
	o->tp.beam_size = 5;
	vad_opts_init(&o->vad);
	diarize_opts_init(&o->diar);
	o->raw.rate = 16000;
	o->raw.channels = 1;
	optind = 1;
	while ((c = getopt_long(argc, argv, "m:l:f:o:t:qh", long_options,
	    NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			vad_opts_help(stdout);
			diarize_opts_help(stdout);
			fputs(usage_tail, stdout);
			exit(0);
		}
		if (c == '?')
			return bad_usage("%s", "bad option");
		if (parse_option(o, c, optarg) != 0)
			return -1;
	}
	if (optind >= argc)
		return bad_usage("%s", "no input file");
	if (diarize_opts_check(&o->diar, msg, sizeof(msg)) != 0)
		return bad_usage("%s", msg);
	if (o->diar.on && o->tp.without_timestamps)
		return bad_usage("%s", "--diarize labels words by their times: "
		    "drop --no-timestamps");
	if (o->diar.on)
		o->tp.word_timestamps = 1;
	if ((o->out.max_line_width || o->out.max_line_count ||
	    o->out.highlight_words) && !o->tp.word_timestamps)
		return bad_usage("%s", "--max-line-width, --max-line-count and "
		    "--highlight-words lay out words: add --word-timestamps");
	if (o->output != NULL && o->output_dir != NULL)
		return bad_usage("%s", "--output and --output-dir: give one");
	if (o->output != NULL && output_flag_check(o->output) != 0)
		return -1;
	if (o->format == OUTPUT_ALL && o->output_dir == NULL)
		return bad_usage("%s", "-f all writes a file per format: give "
		    "--output-dir DIR");
	if (stdin_check(o, argv + optind, argc - optind) != 0)
		return -1;
	set_temperatures(o);
	return 0;
}
