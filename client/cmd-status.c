/*
 * sotto status: what sottod is doing (sessions, clients, lag, real-time
 * factor), as text or as the daemon's JSON.
 */
#include <getopt.h>
#include <stdio.h>
#include <string.h>

#include <json-c/json.h>

#include "client.h"
#include "proto.h"
#include "stream.h"

#define STATUS_TIMEOUT_MS	10000

static const char usage_text[] =
"usage: sotto status [OPTIONS]\n"
"\n"
"  -s, --socket PATH         sottod's socket [$SOTTO_SOCKET, else\n"
"                            " CONN_SOCKET_DEFAULT "]\n"
"      --json                print the daemon's status event as is\n"
"\n"
"Without --json: the daemon's figures, one a line, then a line per\n"
"session (the microphone's, streams, HTTP files): id, source (socket,\n"
"ws, wyoming, mic, http), state, audio seconds received, lag, and\n"
"real-time factor (compute time over audio decoded).\n"
"  -h, --help                show this help\n"
"\n"
"Exit status: 0 ok; 1 the status could not be written (standard output\n"
"full or closed); 2 bad usage; 4 sottod cannot be reached, did not\n"
"answer, or refused (its message and error code are printed).\n";

static const struct option long_options[] = {
	{ "socket", required_argument, NULL, 's' },
	{ "json", no_argument, NULL, 'j' },
	{ "help", no_argument, NULL, 'h' },
	{ NULL, 0, NULL, 0 },
};

/* A number of the session list, or "-" where the daemon has none. */
static const char *
cell(struct json_object *o, const char *key)
{
	struct json_object *v = json_object_object_get(o, key);

	return v != NULL ? json_object_get_string(v) : "-";
}

/* One line per session: id, source, state, audio, lag, RTF. */
static void
status_sessions(struct json_object *list)
{
	struct json_object *e;
	size_t i, n = json_object_array_length(list);

	if (n == 0)
		return;
	printf("\n%-18s %-8s %-12s %9s %7s %6s\n", "SESSION", "SOURCE",
	    "STATE", "AUDIO_S", "LAG_S", "RTF");
	for (i = 0; i < n; i++) {
		e = json_object_array_get_idx(list, i);
		printf("%-18s %-8s %-12s %9s %7s %6s\n", cell(e, "id"),
		    cell(e, "source"), cell(e, "state"), cell(e, "audio_s"),
		    cell(e, "lag_s"), cell(e, "rtf"));
	}
}

/* Every field but "type" as "key: value", then the sessions' table. */
static void
status_print(const char *json)
{
	struct json_object *o, *list = NULL;

	if ((o = json_tokener_parse(json)) == NULL)
		return;
	json_object_object_foreach(o, key, val) {
		if (strcmp(key, "session_list") == 0)
			list = val;
		else if (strcmp(key, "type") != 0)
			printf("%-17s %s\n", key, json_object_get_string(val));
	}
	if (list != NULL && json_object_is_type(list, json_type_array))
		status_sessions(list);
	json_object_put(o);
}

/* sottod's error event as a sentence: its message, then its code. */
static void
status_error(const char *json)
{
	struct json_object *o = json_tokener_parse(json);
	const char *code = json_object_get_string(json_object_object_get(o,
	    "code"));
	const char *message = json_object_get_string(json_object_object_get(o,
	    "message"));

	fprintf(stderr, "sotto status: sottod refused: %s (error %s)\n",
	    message != NULL && *message != '\0' ? message : "no reason given",
	    code != NULL ? code : "without a code");
	json_object_put(o);
}

/* Wait for the status event; 0 or an exit code. */
static int
status_wait(struct conn *c, int as_json)
{
	char err[512], type[PROTO_NAME_MAX], msg[PROTO_MSG_MAX];
	long long deadline = conn_now_ms() + STATUS_TIMEOUT_MS, left;
	const char *ev;
	size_t len;
	int bad = 0;

	while (!c->eof && (left = deadline - conn_now_ms()) > 0) {
		if (conn_poll(c, -1, (int)left, err, sizeof(err)) < 0) {
			fprintf(stderr, "sotto status: %s\n", err);
			return EXIT_DAEMON;
		}
		while ((ev = conn_next_event(c, &len, &bad)) != NULL) {
			if (proto_parse_event((const uint8_t *)ev, len, type,
			    msg) != PROTO_OK)
				continue;
			if (strcmp(type, "error") == 0) {
				status_error(ev);
				return EXIT_DAEMON;
			}
			if (strcmp(type, "status") != 0)
				continue;
			if (as_json)
				printf("%s\n", ev);
			else
				status_print(ev);
			return 0;
		}
		if (bad)
			return EXIT_DAEMON;
	}
	if (c->answered && c->eof)
		fprintf(stderr, "sotto status: sottod closed the connection "
		    "before sending its status\n");
	else if (c->answered)
		fprintf(stderr, "sotto status: sottod did not send its status "
		    "within %d s\n", STATUS_TIMEOUT_MS / 1000);
	else if (c->eof)
		fprintf(stderr, "sotto status: sottod closed the connection "
		    "without answering; %s\n", conn_no_answer_hint());
	else
		fprintf(stderr, "sotto status: no answer from sottod within "
		    "%d s; %s\n", STATUS_TIMEOUT_MS / 1000,
		    conn_no_answer_hint());
	return EXIT_DAEMON;
}

int
cmd_status(int argc, char **argv)
{
	const char *socket = NULL;
	struct conn c;
	char err[512];
	int ch, as_json = 0, code;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "s:h", long_options, NULL)) !=
	    -1) {
		if (ch == 's')
			socket = optarg;
		else if (ch == 'j')
			as_json = 1;
		else if (ch == 'h') {
			fputs(usage_text, stdout);
			return 0;
		} else {
			fprintf(stderr, "Run 'sotto status --help' for "
			    "usage.\n");
			return EXIT_USAGE;
		}
	}
	if (conn_open(&c, conn_socket_path(socket), err, sizeof(err)) != 0) {
		fprintf(stderr, "sotto status: %s\n", err);
		return EXIT_DAEMON;
	}
	conn_queue(&c, MSG_STATUS, "{}", 2);
	code = status_wait(&c, as_json);
	conn_close(&c);
	return code;
}
