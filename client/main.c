/*
 * sotto: the command-line client. Dispatches to one command per file.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "omp-env.h"
#include "stream.h"

struct command {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "transcribe", cmd_transcribe, "transcribe audio files to text, "
	    "SRT, WebVTT or JSON" },
	{ "stream", cmd_stream, "stream audio to sottod, print the live "
	    "transcript" },
	{ "listen", cmd_listen, "live captions of sottod's microphone" },
	{ "status", cmd_status, "sottod's sessions, clients, lag and speed" },
};

static char prog[64] = "sotto";

/*
 * At exit, however the command ends: what it printed on standard output
 * and could not write (a full disk, /dev/full) is an error, exit 1, unless
 * the command already said so.
 */
static void
check_stdout(void)
{
	if (!out_stdout_reported() && out_flush(stdout, prog,
	    "standard output") != 0)
		_exit(EXIT_INPUT);
}

static void
usage(FILE *f)
{
	size_t i;

	fprintf(f, "usage: sotto COMMAND [OPTIONS]\n\ncommands:\n");
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-12s %s\n", commands[i].name,
		    commands[i].summary);
	fprintf(f, "\nRun 'sotto COMMAND --help' for a command's options.\n");
}

int
main(int argc, char **argv)
{
	size_t i;

	omp_env_reexec(argv, OMP_WAIT_SPIN);
	atexit(check_stdout);

	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("sotto %s\n", SOTTO_VERSION);
		return 0;
	}
	for (i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(argv[1], commands[i].name) == 0) {
			snprintf(prog, sizeof(prog), "sotto %s",
			    commands[i].name);
			return commands[i].run(argc - 1, argv + 1);
		}
	fprintf(stderr, "sotto: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
