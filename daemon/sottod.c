/*
 * sottod: the live captioning daemon. Reads the config (flags override
 * it), loads the model, listens on the socket systemd passed or on its
 * own, tells systemd it is ready and runs the event loop.
 *
 * SIGHUP (through the loop, server.c) reads the same config file again:
 * a file with an error is refused and the configuration in effect kept;
 * otherwise the keys that can change live are applied and each key that
 * needs a restart is logged and left as it was. Flags still override.
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "http.h"
#include "listen-addr.h"
#include "log.h"
#include "omp-env.h"
#include "systemd.h"
#include "sottod.h"

#define SOTTOD_BACKLOG		64

struct sottod sottod;

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
"sotto-fetch-model silero-vad, or set vad = off.\n";

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

double
sottod_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

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
	    strlen(f->socket) >= sizeof(sottod.cfg.socket_path))
		sottod_usage("--socket: path too long");
	if (f->model != NULL && strlen(f->model) >= sizeof(sottod.cfg.model))
		sottod_usage("--model: name too long");
	if (f->http != NULL &&
	    strlen(f->http) >= sizeof(sottod.cfg.http_listen))
		sottod_usage("--http: address too long");
	if (f->http != NULL &&
	    listen_addr_parse(f->http, &ss, &len, msg, sizeof(msg)) != 0) {
		snprintf(usage_msg, sizeof(usage_msg), "--http: %s", msg);
		sottod_usage(usage_msg);
	}
	if (f->wyoming != NULL &&
	    strlen(f->wyoming) >= sizeof(sottod.cfg.wyoming_listen))
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
sottod_set_log_level(void)
{
	int level = log_level_parse(sottod.cfg.log_level);

	if (flags.debug || level < 0)
		level = flags.debug ? LOG_LEVEL_DEBUG : LOG_LEVEL_INFO;
	log_setlevel((enum log_level)level);
}

/*
 * Remove a stale socket at path: only a socket, and only when nobody
 * answers on it. Returns 0, or -1 with err.
 */
static int
sottod_unlink_stale(const char *path, const struct sockaddr_un *sun,
    char *err, size_t errlen)
{
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : -1;
	if (!S_ISSOCK(st.st_mode)) {
		snprintf(err, errlen, "%s exists and is not a socket", path);
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1)
		return -1;
	rc = connect(fd, (const struct sockaddr *)sun, sizeof(*sun));
	close(fd);
	if (rc == 0) {
		snprintf(err, errlen, "%s: another sottod is listening", path);
		return -1;
	}
	if (unlink(path) != 0) {
		snprintf(err, errlen, "%s: cannot remove the stale socket: %s",
		    path, strerror(errno));
		return -1;
	}
	log_info("removed stale socket %s", path);
	return 0;
}

static int
sottod_listen(const char *path, char *err, size_t errlen)
{
	struct sockaddr_un sun;
	mode_t old;
	int fd;

	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	if (snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path) >=
	    (int)sizeof(sun.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", path);
		return -1;
	}
	err[0] = '\0';
	if (sottod_unlink_stale(path, &sun, err, errlen) != 0) {
		if (err[0] == '\0')
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return -1;
	}
	if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) == -1) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	old = umask(0777 & ~(mode_t)sottod.cfg.socket_mode);
	if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) != 0 ||
	    chmod(path, (mode_t)sottod.cfg.socket_mode) != 0 ||
	    listen(fd, SOTTOD_BACKLOG) != 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		umask(old);
		close(fd);
		return -1;
	}
	umask(old);
	return fd;
}

/* Give our own socket the configured mode (a SIGHUP may change it). */
static void
sottod_socket_mode(void)
{
	const char *path = sottod.cfg.socket_path;
	struct stat st;

	if (!sottod.own_socket)
		return;
	if (lstat(path, &st) != 0 || !S_ISSOCK(st.st_mode)) {
		log_warnx("reload: %s is no longer our socket; socket_mode "
		    "not applied", path);
		return;
	}
	if ((st.st_mode & 0777) != (mode_t)sottod.cfg.socket_mode &&
	    chmod(path, (mode_t)sottod.cfg.socket_mode) != 0)
		log_warn("reload: chmod %04o %s", sottod.cfg.socket_mode,
		    path);
}

static void
sottod_reload_key(const char *section, const char *key, const char *old,
    const char *new, int live, void *arg)
{
	int *restart = arg;

	if (live) {
		log_info("reload: [%s] %s = %s (was %s)", section, key, new,
		    old);
		return;
	}
	log_warnx("reload: [%s] %s = %s needs a restart; still %s", section,
	    key, new, old);
	(*restart)++;
}

/* SIGHUP, from the loop: read the config again and apply what can be. */
void
sottod_reload(void)
{
	const char *path = sottod_config_path();
	struct config cfg;
	char err[512];
	int n, restart = 0;

	systemd_notify_reloading();
	if (sottod_read_config(&cfg, err, sizeof(err)) != 0) {
		log_warnx("reload: %s; configuration not changed", err);
		systemd_notify_ready(NULL);
		return;
	}
	n = config_diff(&sottod.cfg, &cfg, sottod_reload_key, &restart);
	config_keep_restart_keys(&cfg, &sottod.cfg);
	sottod.cfg = cfg;
	sottod_socket_mode();
	sottod_set_log_level();
	vad_reload();
	log_info("reload: %s: %d change(s) applied, %d need a restart",
	    path != NULL ? path : "no config file (defaults)", n - restart,
	    restart);
	if (!reload_model())
		systemd_notify_ready(NULL);
}

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
	if (check_engine(&sottod.cfg, path, path != NULL ? &lines : NULL,
	    flags.model != NULL, err, sizeof(err)) != 0 ||
	    check_listeners(&sottod.cfg, path, path != NULL ? &lines : NULL,
	    flags.http != NULL, flags.wyoming != NULL, err, sizeof(err)) != 0)
		fatalx("%s", err);
	config_dump(&sottod.cfg, stdout);
}

/* libevent's own messages, into our log. */
static void
sottod_event_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_debug("libevent: %s", msg);
}

int
main(int argc, char **argv)
{
	struct systemd_fds fds;
	char err[512];

	omp_env_reexec(argv, OMP_WAIT_SLEEP);
	sottod_parse_args(argc, argv, &flags);
	log_init("sottod", flags.debug);
	if (sottod_read_config(&sottod.cfg, err, sizeof(err)) != 0)
		fatalx("%s", err);
	sottod_set_log_level();
	if (flags.check) {
		sottod_check_config();
		return 0;
	}
	signal(SIGPIPE, SIG_IGN);
	mem_init();
	sottod.started = sottod_now();
	if (systemd_listen_fds(&fds, err, sizeof(err)) != 0)
		fatalx("%s", err);
	sottod.listen_fd = fds.socket;
	sottod_load_model();
	if (vad_start(err, sizeof(err)) != 0)
		fatalx("%s", err);
	event_set_log_callback(sottod_event_log);
	if (evthread_use_pthreads() != 0 ||
	    (sottod.base = event_base_new()) == NULL ||
	    reload_init(err, sizeof(err)) != 0)
		fatalx("cannot set up the event loop");
	if (sottod.listen_fd == -1) {
		sottod.listen_fd = sottod_listen(sottod.cfg.socket_path, err,
		    sizeof(err));
		if (sottod.listen_fd == -1)
			fatalx("%s", err);
		sottod.own_socket = 1;
	}
	if (server_start(sottod.listen_fd, err, sizeof(err)) != 0 ||
	    session_mic_start(err, sizeof(err)) != 0 ||
	    http_start(fds.http, err, sizeof(err)) != 0 ||
	    wyoming_start(sottod.cfg.wyoming_listen, fds.wyoming, err,
	    sizeof(err)) != 0)
		fatalx("%s", err);
	web_start();
	log_info("listening on %s%s", sottod.own_socket ?
	    sottod.cfg.socket_path : "the socket from systemd",
	    sottod.own_socket ? "" : " (socket activation)");
	systemd_notify_ready("ready");
	event_base_dispatch(sottod.base);
	log_info("stopping");
	/* Once the loop is over (server_stop frees its signal events) a
	 * late SIGTERM would kill us with a failure while we join the
	 * compute thread (at most one step): we are exiting anyway. */
	signal(SIGTERM, SIG_IGN);
	signal(SIGINT, SIG_IGN);
	http_stop();
	server_stop();
	event_base_loop(sottod.base, EVLOOP_NONBLOCK);
	if (sottod.own_socket)
		unlink(sottod.cfg.socket_path);
	reload_stop();
	models_free_all();
	vad_free();
	event_base_free(sottod.base);
	return 0;
}
