/*
 * sottod: the live captioning daemon. The program: its flags, the config
 * they override, and the order the parts start and stop in. It is the
 * one file that names the core and every front door (docs/architecture.md,
 * "Layers"): the core (daemon/core) is set up with the configuration,
 * each door (daemon/unix, http, ws, wyoming) registers itself with the
 * core when it starts, and nothing calls back into this file but the
 * hooks it gives the core (a SIGHUP reads the same config file again,
 * flags still overriding it).
 */
#include <sys/socket.h>

#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "daemon.h"
#include "deepgram.h"
#include "http.h"
#include "httpd.h"
#include "listen-addr.h"
#include "log.h"
#include "omp-env.h"
#include "realtime.h"
#include "systemd.h"
#include "unix.h"
#include "ws.h"
#include "wyoming.h"

static const char usage_text[] =
"usage: sottod [OPTIONS]\n"
"\n"
"The sotto live captioning daemon: streams of audio in over a Unix\n"
"socket (or the microphone), partial and final transcripts out; with\n"
"--http, whole files transcribed over HTTP as `sotto transcribe` does.\n"
"\n"
"  -f, --config PATH         config file [" CONFIG_PATH_DEFAULT "]\n"
"  -s, --socket PATH         listen on PATH (ignored when systemd passes\n"
"                            a socket)\n"
"  -m, --model NAME|PATH     model name (NAME.gguf in $SOTTO_MODEL_DIR,\n"
"                            ./models or " SOTTO_MODELDIR ";\n"
"                            see sotto-fetch-model) or .gguf path\n"
"  -t, --threads N           compute threads (0: all cores)\n"
"      --http ADDR:PORT      also serve the OpenAI-compatible HTTP API\n"
"                            (POST /v1/audio/transcriptions, /health,\n"
"                            /metrics) there, e.g. 127.0.0.1:8000; any\n"
"                            address but loopback needs [http] token\n"
"      --precision auto|fp32|bf16|int8\n"
"      --wyoming ADDR:PORT   serve the Wyoming protocol (Home Assistant)\n"
"                            there (0.0.0.0:10300; docs/protocol.md)\n"
"  -d, --debug               debug logging\n"
"      --check-config        check the configuration and its model (a\n"
"                            readable GGUF with the languages asked for),\n"
"                            print the configuration and exit\n"
"  -h, --help                show this help\n"
"      --version             print the version\n"
"\n"
"Flags override the config file. SIGTERM stops accepting, takes the\n"
"audio clients wrote before it, finishes every stream (clients get their\n"
"last finals), then exits; streams still decoding after\n"
"shutdown_grace_seconds (or at a second SIGTERM) end at once, each\n"
"client told how many seconds were not transcribed (\"undecoded_s\").\n"
"Connections are limited (max_connections, max_connections_per_uid)\n"
"apart from sessions (max_sessions); one that sends no HELLO within\n"
"handshake_timeout_seconds, or no frame for idle_timeout_seconds while\n"
"sottod waits for one, is closed with a timeout error. SIGHUP reads the\n"
"config file again and applies the limits, timeouts, log level, socket\n"
"mode and engine settings of new sessions; a file with an error is\n"
"refused (the log names its line) and changes to socket, threads,\n"
"precision or [mic] are logged as needing a restart. SIGHUP also loads\n"
"the model again when the config names another one or its file was\n"
"replaced, without dropping clients: open sessions finish on the old\n"
"model, new ones use the new one, and the microphone moves to it at a\n"
"pause. The model file is read into memory at load: replacing or\n"
"truncating it changes nothing until then.\n"
"\n"
"Voice activity detection ([engine] vad = live, the default): the\n"
"microphone and live streams are decoded only where Silero VAD hears\n"
"speech; its model (vad_model = silero-vad, found beside the Whisper\n"
"model) must load, else sottod does not start: fetch it with\n"
"sotto-fetch-model silero-vad, or set vad = off.\n"
"\n"
"Speaker labels (requests that ask for them) need the speaker model\n"
"(speaker_model = campplus, found like vad_model): fetch it with\n"
"sotto-fetch-model campplus. It is loaded by the first such request;\n"
"without it they are refused and everything else works.\n";

enum { OPT_PRECISION = 256, OPT_CHECK, OPT_VERSION, OPT_HTTP, OPT_WYOMING };

static const struct option long_options[] = {
	{ "config", required_argument, NULL, 'f' },
	{ "socket", required_argument, NULL, 's' },
	{ "model", required_argument, NULL, 'm' },
	{ "threads", required_argument, NULL, 't' },
	{ "precision", required_argument, NULL, OPT_PRECISION },
	{ "http", required_argument, NULL, OPT_HTTP },
	{ "wyoming", required_argument, NULL, OPT_WYOMING },
	{ "debug", no_argument, NULL, 'd' },
	{ "check-config", no_argument, NULL, OPT_CHECK },
	{ "help", no_argument, NULL, 'h' },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

/* Command-line flags, checked once; they override every config read. */
struct sottod_flags {
	const char *config, *socket, *model, *precision, *http, *wyoming;
	int threads;		/* -1: not given */
	int debug, check;
};
static struct sottod_flags flags;
static struct config sottod_cfg;	/* as read at start */

static __attribute__((noreturn)) void
sottod_usage(const char *msg)
{
	fprintf(stderr, "sottod: %s\nRun 'sottod --help' for usage.\n", msg);
	exit(2);
}

/* Check the flags that take a value; exit 2 on a bad one. */
static void
sottod_check_args(struct sottod_flags *f, const char *threads)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char msg[256], usage_msg[300], *end;
	long v;

	if (threads != NULL) {
		v = strtol(threads, &end, 10);
		if (*threads == '\0' || *end != '\0' || v < 0 || v > 1024)
			sottod_usage("--threads takes 0 to 1024");
		f->threads = (int)v;
	}
	if (f->precision != NULL && strcmp(f->precision, "auto") != 0 &&
	    strcmp(f->precision, "fp32") != 0 &&
	    strcmp(f->precision, "bf16") != 0 &&
	    strcmp(f->precision, "int8") != 0)
		sottod_usage("--precision must be auto, fp32, bf16 or int8");
	if (f->socket != NULL &&
	    strlen(f->socket) >= sizeof(sottod_cfg.socket_path))
		sottod_usage("--socket: path too long");
	if (f->model != NULL && strlen(f->model) >= sizeof(sottod_cfg.model))
		sottod_usage("--model: name too long");
	if (f->http != NULL &&
	    strlen(f->http) >= sizeof(sottod_cfg.http_listen))
		sottod_usage("--http: address too long");
	if (f->http != NULL &&
	    listen_addr_parse(f->http, &ss, &len, msg, sizeof(msg)) != 0) {
		snprintf(usage_msg, sizeof(usage_msg), "--http: %s", msg);
		sottod_usage(usage_msg);
	}
	if (f->wyoming != NULL &&
	    strlen(f->wyoming) >= sizeof(sottod_cfg.wyoming_listen))
		sottod_usage("--wyoming: address too long");
	if (f->wyoming != NULL &&
	    listen_addr_parse(f->wyoming, &ss, &len, msg, sizeof(msg)) != 0) {
		snprintf(usage_msg, sizeof(usage_msg), "--wyoming: %s", msg);
		sottod_usage(usage_msg);
	}
}

static void
sottod_parse_args(int argc, char **argv, struct sottod_flags *f)
{
	const char *threads = NULL;
	int c;

	memset(f, 0, sizeof(*f));
	f->threads = -1;
	while ((c = getopt_long(argc, argv, "f:s:m:t:dh", long_options,
	    NULL)) != -1) {
		switch (c) {
		case 'f': f->config = optarg; break;
		case 's': f->socket = optarg; break;
		case 'm': f->model = optarg; break;
		case 't': threads = optarg; break;
		case 'd': f->debug = 1; break;
		case OPT_PRECISION: f->precision = optarg; break;
		case OPT_HTTP: f->http = optarg; break;
		case OPT_WYOMING: f->wyoming = optarg; break;
		case OPT_CHECK: f->check = 1; break;
		case OPT_VERSION:
			printf("sottod %s (protocol %d)\n", SOTTO_VERSION,
			    SOTTO_PROTO_VERSION);
			exit(0);
		case 'h':
			fputs(usage_text, stdout);
			exit(0);
		default:
			sottod_usage("bad option");
		}
	}
	if (optind != argc)
		sottod_usage("unexpected argument");
	sottod_check_args(f, threads);
}

/* The config file: --config, else the default one if it exists. */
static const char *
sottod_config_path(void)
{
	if (flags.config != NULL)
		return flags.config;
	return access(CONFIG_PATH_DEFAULT, F_OK) == 0 ? CONFIG_PATH_DEFAULT :
	    NULL;
}

/* Defaults, the config file, then the flags. 0, or -1 with err. */
static int
sottod_read_config(struct config *cfg, char *err, size_t errlen)
{
	const char *path = sottod_config_path();

	config_defaults(cfg);
	if (path != NULL && config_load(cfg, path, err, errlen) != 0)
		return -1;
	if (flags.socket != NULL)
		snprintf(cfg->socket_path, sizeof(cfg->socket_path), "%s",
		    flags.socket);
	if (flags.model != NULL)
		snprintf(cfg->model, sizeof(cfg->model), "%s", flags.model);
	if (flags.http != NULL)
		snprintf(cfg->http_listen, sizeof(cfg->http_listen), "%s",
		    flags.http);
	if (flags.threads >= 0)
		cfg->threads = flags.threads;
	if (flags.precision != NULL)
		snprintf(cfg->precision, sizeof(cfg->precision), "%s",
		    flags.precision);
	if (flags.wyoming != NULL)
		snprintf(cfg->wyoming_listen, sizeof(cfg->wyoming_listen),
		    "%s", flags.wyoming);
	return 0;
}

static void
sottod_set_log_level(const struct config *cfg)
{
	int level = log_level_parse(cfg->log_level);

	if (flags.debug || level < 0)
		level = flags.debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO;
	log_setlevel((enum log_level)level);
}

static const char *
sottod_config_source(void)
{
	const char *path = sottod_config_path();

	return path != NULL ? path : "no config file (defaults)";
}

static const struct core_hooks sottod_hooks = {
	.read_config = sottod_read_config,
	.applied = sottod_set_log_level,
	.source = sottod_config_source,
};

/*
 * --check-config: the configuration read (flags over the file), then its
 * model; exits 1 with "file:line: key: message" when it would fail.
 */
static void
sottod_check_config(void)
{
	const char *path = sottod_config_path();
	struct config_lines lines;
	struct config file;
	char err[2048];

	/* Where each key is, for messages: the file read once more. */
	config_defaults(&file);
	if (path != NULL && config_load_lines(&file, path, &lines, err,
	    sizeof(err)) != 0)
		fatalx("%s", err);
	if (check_engine(&sottod_cfg, path, path != NULL ? &lines : NULL,
	    flags.model != NULL, err, sizeof(err)) != 0 ||
	    check_listeners(&sottod_cfg, path, path != NULL ? &lines : NULL,
	    flags.http != NULL, flags.wyoming != NULL, err, sizeof(err)) != 0)
		fatalx("%s", err);
	config_dump(&sottod_cfg, stdout);
}

/* The doors, each on its listener: systemd's, else the config's. */
static void
sottod_doors(const struct systemd_fds *fds)
{
	char err[512];

	if (unix_start(fds->socket, err, sizeof(err)) != 0 ||
	    httpd_start(fds->http, err, sizeof(err)) != 0 ||
	    http_start(err, sizeof(err)) != 0 ||
	    ws_start(err, sizeof(err)) != 0 ||
	    realtime_start(err, sizeof(err)) != 0 ||
	    deepgram_start(err, sizeof(err)) != 0 ||
	    wyoming_start(sottod_cfg.wyoming_listen, fds->wyoming, err,
	    sizeof(err)) != 0)
		fatalx("%s", err);
}

int
main(int argc, char **argv)
{
	struct systemd_fds fds;
	char err[512];

	omp_env_reexec(argv, OMP_WAIT_SLEEP);
	sottod_parse_args(argc, argv, &flags);
	log_init("sottod", flags.debug);
	if (sottod_read_config(&sottod_cfg, err, sizeof(err)) != 0)
		fatalx("%s", err);
	sottod_set_log_level(&sottod_cfg);
	if (flags.check) {
		sottod_check_config();
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	if (systemd_listen_fds(&fds, err, sizeof(err)) != 0 ||
	    core_init(&sottod_cfg, &sottod_hooks, err, sizeof(err)) != 0)
		fatalx("%s", err);
	sottod_doors(&fds);
	if (core_start(err, sizeof(err)) != 0)
		fatalx("%s", err);
	systemd_notify_ready("ready");
	core_run();
	log_info("stopping");
	core_shutdown();	/* signals from here on are ignored */
	return 0;
}
