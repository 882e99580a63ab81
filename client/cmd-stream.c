/*
 * sotto stream: send a file (paced as live, or as fast as the daemon
 * takes it) or raw audio from standard input to sottod, print the
 * transcript as it comes.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>
#include <opus.h>

#include "client.h"
#include "proto.h"
#include "stream-run.h"

static volatile sig_atomic_t stream_interrupted;

static const char usage_text[] =
"usage: sotto stream [OPTIONS] FILE|-\n"
"\n"
"Stream audio to sottod and print the live transcript. FILE is any file\n"
"sotto transcribe reads (wav, flac, ogg, opus, mp3, m4a, mp4, webm, mkv,\n"
"mpeg), sent paced as if live unless --fast; '-' reads raw\n"
"PCM from standard input (e.g. arecord -t raw -f S16_LE -r 16000 -c 1).\n"
"\n"
"  -s, --socket PATH         sottod's socket [$SOTTO_SOCKET, else\n"
"                            " CONN_SOCKET_DEFAULT "]\n"
"  -f, --format text|jsonl|srt|vtt   output [text]: text is a line per\n"
"                            caption unit (on a terminal the open unit is\n"
"                            redrawn in place, its tentative words dim),\n"
"                            srt and vtt a cue per unit, each written as\n"
"                            the unit closes; jsonl prints each event\n"
"                            exactly as the daemon sent it\n"
"  -o, --output FILE         write the output to FILE [standard output]\n"
"      --fast                send as fast as the daemon decodes, as audio\n"
"                            that is not live (FILE or '-'): stepped at the\n"
"                            daemon's step size whatever its load, so the\n"
"                            transcript does not depend on the load\n"
"      --realtime            pace a file as live audio [default]; live\n"
"                            audio is caught up in larger steps when the\n"
"                            daemon falls behind\n"
"  -l, --language CODE|auto  spoken language [the daemon's]; a detected\n"
"                            language is printed on standard error (jsonl:\n"
"                            the daemon's language events)\n"
"      --task transcribe|translate\n"
"      --opus                send the file Opus-encoded\n"
"      --raw-format s16le|f32le|mulaw|alaw  standard input's samples\n"
"                            [s16le]; mulaw and alaw are G.711 telephone\n"
"                            audio (with --rate 8000)\n"
"      --rate N              standard input's rate [16000]\n"
"      --channels N          standard input's channels [1]\n"
"      --chunk-ms N          audio per frame [100]\n"
"      --word-timestamps     finals carry words with their times (jsonl:\n"
"                            \"words\" in each final segment)\n"
"      --diarize             label each speaker, as they come: S1, S2, ...\n"
"                            (a new voice gets the next label; labels\n"
"                            never change). text starts a line 'S1: ' at\n"
"                            each change of speaker, vtt cues <v S1>,\n"
"                            srt '[S1] ', jsonl \"speaker\" on each final\n"
"                            segment and unit. sottod needs its speaker\n"
"                            model (scripts/fetch-model campplus)\n"
"      --prompt TEXT         vocabulary: names and terms to spell as given\n"
"                            (\"Gutenberg, Dashwood\"), kept before every\n"
"                            window's text as faster-whisper's hotwords\n"
"                            (at most 1023 bytes; its first 111 tokens)\n"
"      --resume              when the connection to sottod is lost, connect\n"
"                            again (retrying for up to 30 s) and resume the\n"
"                            session: the finals not yet received, then\n"
"                            the audio the daemon did not take is sent\n"
"                            again; if the session is gone (sottod was\n"
"                            restarted) a new one goes on from the end of\n"
"                            the last final (times stay on the input's\n"
"                            clock); what is lost is printed\n"
"  -h, --help                show this help\n"
"\n"
"Ctrl-C ends the stream: the daemon sends the last finals, then sotto\n"
"exits. Exit status: 0 done; 1 bad input, the daemon reported an\n"
"error, or the transcript could not be written (the output full\n"
"or closed); 2 bad usage; 4 cannot reach sottod or it closed the stream;\n"
"5 sottod stopped (shutdown) before transcribing all the audio it\n"
"received: the message on stderr says how many seconds are missing.\n";

enum { OPT_FAST = 256, OPT_REALTIME, OPT_TASK, OPT_OPUS, OPT_RAW, OPT_RATE,
	OPT_CHANNELS, OPT_CHUNK, OPT_WORDS, OPT_RESUME, OPT_PROMPT,
	OPT_LIVE_SPEAKERS };

static const struct option long_options[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "fast", no_argument, NULL, OPT_FAST },
	{ "realtime", no_argument, NULL, OPT_REALTIME },
	{ "language", required_argument, NULL, 'l' },
	{ "task", required_argument, NULL, OPT_TASK },
	{ "opus", no_argument, NULL, OPT_OPUS },
	{ "raw-format", required_argument, NULL, OPT_RAW },
	{ "rate", required_argument, NULL, OPT_RATE },
	{ "channels", required_argument, NULL, OPT_CHANNELS },
	{ "chunk-ms", required_argument, NULL, OPT_CHUNK },
	{ "word-timestamps", no_argument, NULL, OPT_WORDS },
	{ "diarize", no_argument, NULL, OPT_LIVE_SPEAKERS },
	{ "resume", no_argument, NULL, OPT_RESUME },
	{ "prompt", required_argument, NULL, OPT_PROMPT },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* Where the output goes, for messages. */
static const char *
out_name(const struct stream_opts *o)
{
	return o->output != NULL && strcmp(o->output, "-") != 0 ? o->output :
	    "standard output";
}

static int
stream_usage(const char *msg, const char *arg)
{
	fprintf(stderr, "sotto stream: %s%s\nRun 'sotto stream --help' for "
	    "usage.\n", msg, arg ? arg : "");
	return EXIT_USAGE;
}

static int
stream_option(struct stream_opts *o, int c, const char *arg)
{
	switch (c) {
	case 's': o->socket = arg; return 0;
	case 'o': o->output = arg; return 0;
	case 'l': o->language = arg; return 0;
	case OPT_TASK: o->task = arg; return 0;
	case OPT_FAST: o->fast = 1; return 0;
	case OPT_REALTIME: o->fast = 0; return 0;
	case OPT_WORDS: o->words = 1; return 0;
	case OPT_LIVE_SPEAKERS: o->diarize = 1; return 0;
	case OPT_RESUME: o->resume = 1; return 0;
	case OPT_PROMPT:
		if (strlen(arg) >= PROTO_PROMPT_MAX)
			return stream_usage("--prompt: at most 1023 bytes", NULL);
		o->prompt = arg;
		return 0;
	case OPT_OPUS: o->send_format = PROTO_FORMAT_OPUS; return 0;
	case 'f':
		return stream_output_format(arg, &o->format) ? stream_usage(
		    "--format must be text, jsonl, srt or vtt: ", arg) : 0;
	case OPT_RAW:
		if (strcmp(arg, "s16le") == 0)
			o->raw_format = PROTO_FORMAT_S16LE;
		else if (strcmp(arg, "f32le") == 0)
			o->raw_format = PROTO_FORMAT_F32LE;
		else if (strcmp(arg, "mulaw") == 0)
			o->raw_format = PROTO_FORMAT_MULAW;
		else if (strcmp(arg, "alaw") == 0)
			o->raw_format = PROTO_FORMAT_ALAW;
		else
			return stream_usage("--raw-format must be s16le, "
			    "f32le, mulaw or alaw: ", arg);
		return 0;
	case OPT_RATE:
		return args_int(arg, PROTO_RATE_MIN, PROTO_RATE_MAX,
		    &o->rate) ? stream_usage("bad --rate ", arg) : 0;
	case OPT_CHANNELS:
		return args_int(arg, 1, PROTO_CHANNELS_MAX, &o->channels) ?
		    stream_usage("bad --channels ", arg) : 0;
	case OPT_CHUNK:
		return args_int(arg, 20, 10000, &o->chunk_ms) ?
		    stream_usage("bad --chunk-ms ", arg) : 0;
	}
	return stream_usage("bad option", NULL);
}

static int
stream_parse(struct stream_opts *o, int argc, char **argv)
{
	int c;

	memset(o, 0, sizeof(*o));
	o->rate = 16000;
	o->channels = 1;
	o->chunk_ms = 100;
	o->send_format = PROTO_FORMAT_F32LE;
	optind = 1;
	while ((c = getopt_long(argc, argv, "s:f:o:l:h", long_options,
	    NULL)) != -1) {
		if (c == 'h') {
			fputs(usage_text, stdout);
			exit(0);
		}
		if (stream_option(o, c, optarg) != 0)
			return -1;
	}
	if (optind != argc - 1)
		return stream_usage("give one FILE, or - for standard input",
		    NULL);
	o->file = argv[optind];
	return 0;
}

static void
stream_sigint(int sig)
{
	stream_interrupted++;
}

int
stream_open_frame(struct conn *c, const struct stream_opts *o, int is_stdin)
{
	enum proto_format fmt = is_stdin ? o->raw_format : o->send_format;
	struct json_object *m;
	const char *json;
	size_t len;
	int rc = -1;

	if ((m = json_object_new_object()) == NULL)
		return -1;
	json_object_object_add(m, "format",
	    json_object_new_string(proto_format_name(fmt)));
	json_object_object_add(m, "rate",
	    json_object_new_int(is_stdin ? o->rate : 16000));
	json_object_object_add(m, "channels",
	    json_object_new_int(is_stdin ? o->channels : 1));
	if (o->language != NULL)
		json_object_object_add(m, "language",
		    json_object_new_string(o->language));
	if (o->task != NULL)
		json_object_object_add(m, "task",
		    json_object_new_string(o->task));
	/* live unless --fast: the daemon may then step it in larger steps
	 * to keep up when it has more streams than it can step in time */
	if (!o->fast)
		json_object_object_add(m, "live", json_object_new_boolean(1));
	if (o->words)
		json_object_object_add(m, "word_timestamps",
		    json_object_new_boolean(1));
	if (o->diarize)
		json_object_object_add(m, "diarize",
		    json_object_new_boolean(1));
	if (o->prompt != NULL)
		json_object_object_add(m, "prompt",
		    json_object_new_string(o->prompt));
	json = json_object_to_json_string_length(m, JSON_C_TO_STRING_PLAIN,
	    &len);
	if (json != NULL)
		rc = conn_queue(c, MSG_OPEN, json, len);
	json_object_put(m);
	return rc;
}

/*
 * Print what arrived; 1 when the stream is over, with *ret_code; 2 when
 * the connection is lost and --resume should try again.
 */
static int
stream_events(struct stream_run *r, const struct stream_opts *o,
    int *ret_code)
{
	struct json_object *ev;
	const char *json, *type;
	size_t len;
	int bad, k = 0;

	while ((json = conn_next_event(&r->c, &len, &bad)) != NULL) {
		if ((ev = json_tokener_parse(json)) != NULL) {
			type = json_object_get_string(json_object_object_get(
			    ev, "type"));
			type = type != NULL ? type : "";
			if (strcmp(type, "final") == 0)
				stream_note_final(r, ev);
			k = r->resuming ? stream_resume_answer(r, o, type, ev) :
			    0;
			json_object_put(ev);
			if (k == 2)
				return 2;
		}
		stream_output_event(&r->out, json, len);
		if (r->out.werr != 0) {
			out_report(r->out.f, "sotto stream", out_name(o),
			    r->out.werr);
			*ret_code = EXIT_INPUT;
			return 1;
		}
		if (r->out.failed) {
			*ret_code = EXIT_INPUT;
			return 1;
		}
		if (r->out.ended) {
			*ret_code = r->out.undecoded_s > 0 ? EXIT_UNDECODED : 0;
			return 1;
		}
	}
	if ((bad || r->c.eof) && o->resume)
		return 2;
	if (bad || r->c.eof) {
		if (!bad && !r->c.answered)
			fprintf(stderr, "sotto stream: sottod closed the "
			    "connection without answering; %s\n",
			    conn_no_answer_hint());
		else if (!bad)
			fprintf(stderr, "sotto stream: sottod closed the "
			    "connection before the end of the stream\n");
		*ret_code = EXIT_DAEMON;
		return 1;
	}
	return 0;
}

static int
stream_loop(struct stream_run *r, const struct stream_opts *o)
{
	char err[512];
	int timeout, extra, rc, code, k;

	for (;;) {
		timeout = stream_feed(r, o, stream_interrupted);
		extra = r->is_stdin && !r->src.stdin_eof && !r->end_sent &&
		    !r->resuming &&
		    conn_pending(&r->c) < STREAM_QUEUE_MAX_BYTES ?
		    STDIN_FILENO : -1;
		k = 0;
		if ((rc = conn_poll(&r->c, extra, timeout, err,
		    sizeof(err))) < 0) {
			if (!o->resume) {
				fprintf(stderr, "sotto stream: %s\n", err);
				return EXIT_DAEMON;
			}
			/* the events that came before it first */
			if (stream_events(r, o, &code) == 1)
				return code;
			k = 2;
		}
		if (rc == 1 && stream_stdin_chunk(r, o) != 0) {
			fprintf(stderr, "sotto stream: out of memory\n");
			return EXIT_INPUT;
		}
		if (k == 0 && (k = stream_events(r, o, &code)) == 1)
			return code;
		if (k == 2 && (code = stream_resume(r, o)) != 0)
			return code;
		if (stream_interrupted > 1)
			return 130;
	}
}

int
cmd_stream(int argc, char **argv)
{
	struct stream_opts o;
	struct stream_run r;
	struct sigaction sa;
	char err[512];
	FILE *f;
	int code;

	if (stream_parse(&o, argc, argv) != 0)
		return EXIT_USAGE;
	memset(&r, 0, sizeof(r));
	r.is_stdin = strcmp(o.file, "-") == 0;
	r.path = conn_socket_path(o.socket);
	r.last_final = -1;
	if (stream_load(&r.src, &o) != 0)
		return EXIT_INPUT;
	if (conn_open(&r.c, r.path, err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto stream: %s\n", err);
		free(r.src.pcm);
		return EXIT_DAEMON;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = stream_sigint;
	sigaction(SIGINT, &sa, NULL);
	if (stream_open_frame(&r.c, &o, r.is_stdin) != 0) {
		fprintf(stderr, "sotto stream: out of memory\n");
		conn_close(&r.c);
		free(r.src.pcm);
		return EXIT_INPUT;
	}
	if ((f = stream_output_open(o.output, "sotto stream")) == NULL) {
		conn_close(&r.c);
		free(r.src.pcm);
		return EXIT_INPUT;
	}
	stream_output_init(&r.out, f, o.format);
	r.t0 = stream_now();
	code = stream_loop(&r, &o);
	stream_output_done(&r.out);
	if (r.out.werr != 0) {
		out_report(r.out.f, "sotto stream", out_name(&o), r.out.werr);
		code = EXIT_INPUT;
	}
	if (f != stdout && fclose(f) != 0 && code == 0) {
		fprintf(stderr, "sotto stream: cannot write %s: %s\n",
		    o.output, strerror(errno));
		code = EXIT_INPUT;
	}
	conn_close(&r.c);
	if (r.src.enc != NULL)
		opus_encoder_destroy(r.src.enc);
	free(r.src.pcm);
	stream_sent_free(&r.frames);
	return code;
}
