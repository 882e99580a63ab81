/*
 * sotto listen: live captions of a shared source (the microphone) that
 * sottod captures; any number of listeners get the same events.
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "client.h"
#include "proto.h"
#include "stream.h"

static const char usage_text[] =
"usage: sotto listen [OPTIONS]\n"
"\n"
"Print the live transcript of the daemon's microphone ([mic] in\n"
"sottod.conf) until Ctrl-C or until the daemon stops. While its device\n"
"is missing or unplugged (sottod keeps trying it), a message on standard\n"
"error says so, and another when it captures again.\n"
"\n"
"  -s, --socket PATH         sottod's socket [$SOTTO_SOCKET, else\n"
"                            " CONN_SOCKET_DEFAULT "]\n"
"  -f, --format text|jsonl|srt|vtt   output [text]: a line, or a cue,\n"
"                            per caption unit as it closes\n"
"  -o, --output FILE         write the output to FILE [standard output];\n"
"                            a live subtitle file with -f srt or vtt\n"
"      --since ID            first replay the kept finals after ID\n"
"                            (-1: all kept, and the caption units kept)\n"
"                            [none: live only]\n"
"  -h, --help                show this help\n"
"\n"
"Exit status: 0 the daemon ended the stream or Ctrl-C; 2 bad usage;\n"
"1, 4 or 5 (audio not transcribed at shutdown) as for sotto stream.\n";

static const struct option long_options[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "format", required_argument, NULL, 'f' },
	{ "output", required_argument, NULL, 'o' },
	{ "since", required_argument, NULL, 'S' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/*
 * How often to ask sottod for the microphone's state: it sends its
 * subscribers nothing while the device is missing or unplugged, so
 * without asking a listener would just wait in silence.
 */
#define LISTEN_MIC_CHECK_MS	5000

static volatile sig_atomic_t listen_interrupted;

static void
listen_sigint(int sig)
{
	listen_interrupted = 1;
}

static int
listen_usage(const char *msg)
{
	fprintf(stderr, "sotto listen: %s\nRun 'sotto listen --help' for "
	    "usage.\n", msg);
	return EXIT_USAGE;
}

/*
 * A status event (asked for by listen_loop, never printed): say when the
 * microphone goes down and when it is back. *was: the last state told.
 */
static void
listen_mic_state(struct stream_output *out, const char *json, char *was,
    size_t len)
{
	struct json_object *o = json_tokener_parse(json), *v;
	const char *mic;

	if (o == NULL || !json_object_object_get_ex(o, "mic", &v) ||
	    (mic = json_object_get_string(v)) == NULL ||
	    strcmp(mic, was) == 0) {
		json_object_put(o);
		return;
	}
	stream_output_clear(out);
	if (strcmp(mic, "down") == 0)
		fprintf(stderr, "sotto listen: sottod's microphone is down: "
		    "its device ([mic] device in sottod.conf) cannot be "
		    "opened or was unplugged, so there is nothing to caption; "
		    "sottod tries again every few seconds, and its log says "
		    "why (journalctl -u sottod)\n");
	else if (strcmp(mic, "capturing") == 0 && strcmp(was, "down") == 0)
		fprintf(stderr, "sotto listen: sottod's microphone is "
		    "capturing again\n");
	snprintf(was, len, "%s", mic);
	json_object_put(o);
}

static int
listen_loop(struct conn *c, struct stream_output *out)
{
	char err[512], type[PROTO_NAME_MAX], msg[PROTO_MSG_MAX], mic[16] = "";
	long long next = 0, now;
	const char *ev;
	size_t len;
	int bad;

	while (!listen_interrupted) {
		if ((now = conn_now_ms()) >= next) {
			conn_queue(c, MSG_STATUS, "{}", 2);
			next = now + LISTEN_MIC_CHECK_MS;
		}
		if (conn_poll(c, -1, (int)(next - now), err, sizeof(err)) < 0) {
			fprintf(stderr, "sotto listen: %s\n", err);
			return EXIT_DAEMON;
		}
		while ((ev = conn_next_event(c, &len, &bad)) != NULL) {
			if (proto_parse_event((const uint8_t *)ev, len, type,
			    msg) == PROTO_OK && strcmp(type, "status") == 0) {
				listen_mic_state(out, ev, mic, sizeof(mic));
				continue;
			}
			stream_output_event(out, ev, len);
			if (out->failed || out->werr != 0)
				return EXIT_INPUT;
			if (out->ended)
				return out->undecoded_s > 0 ? EXIT_UNDECODED :
				    0;
		}
		if (bad)
			return EXIT_DAEMON;
		if (c->eof) {
			fprintf(stderr, "sotto listen: sottod closed the "
			    "connection%s%s\n", c->answered ? "" :
			    " without answering; ", c->answered ? "" :
			    conn_no_answer_hint());
			return EXIT_DAEMON;
		}
	}
	return 0;
}

int
cmd_listen(int argc, char **argv)
{
	const char *socket = NULL, *output = NULL;
	FILE *f;
	enum stream_format fmt = STREAM_TEXT;
	struct stream_output out;
	struct sigaction sa;
	struct conn c;
	char err[512], json[128], *end;
	long long since = PROTO_SINCE_NONE;
	int ch, n, code;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "s:f:o:h", long_options, NULL)) !=
	    -1) {
		switch (ch) {
		case 's':
			socket = optarg;
			break;
		case 'o':
			output = optarg;
			break;
		case 'f':
			if (stream_output_format(optarg, &fmt) != 0)
				return listen_usage("--format must be text, "
				    "jsonl, srt or vtt");
			break;
		case 'S':
			since = strtoll(optarg, &end, 10);
			if (*optarg == '\0' || *end != '\0' || since < -1)
				return listen_usage("bad --since");
			break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			return listen_usage("bad option");
		}
	}
	if (optind != argc)
		return listen_usage("unexpected argument");
	if ((f = stream_output_open(output, "sotto listen")) == NULL)
		return EXIT_INPUT;
	if (conn_open(&c, conn_socket_path(socket), err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto listen: %s\n", err);
		if (f != stdout)
			fclose(f);
		return EXIT_DAEMON;
	}
	if (since == PROTO_SINCE_NONE)
		n = snprintf(json, sizeof(json), "{\"source\":\"mic\"}");
	else
		/* all the units kept only with all the finals: unit ids are
		 * not final ids */
		n = snprintf(json, sizeof(json), "{\"source\":\"mic\","
		    "\"since\":%lld%s}", since, since == -1 ?
		    ",\"since_unit\":-1" : "");
	conn_queue(&c, MSG_SUBSCRIBE, json, (size_t)n);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = listen_sigint;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	stream_output_init(&out, f, fmt);
	code = listen_loop(&c, &out);
	stream_output_done(&out);
	if (out.werr != 0) {
		out_report(out.f, "sotto listen", f != stdout ? output :
		    "standard output", out.werr);
		code = EXIT_INPUT;
	}
	if (f != stdout && fclose(f) != 0 && code == 0) {
		fprintf(stderr, "sotto listen: cannot write %s: %s\n", output,
		    strerror(errno));
		code = EXIT_INPUT;
	}
	conn_close(&c);
	return code;
}
