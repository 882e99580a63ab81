/*
 * Unit tests for daemon/base/config.c: defaults, every key, the shipped
 * conf/sottod.conf, and bad files whose messages must name file and line.
 */
#include <sys/stat.h>

#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "config.h"

#define TEST_ERR_MAX	1024

static char test_dir[256];
static char test_file[300];
static char test_other[300];	/* a FIFO, a link, a directory */

/* Write text to the test file; returns its path. */
static const char *
test_write(const char *text)
{
	FILE *fp;

	fp = fopen(test_file, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
	return test_file;
}

/* Write len bytes (NUL bytes too) to the test file; returns its path. */
static const char *
test_write_bytes(const char *bytes, size_t len)
{
	FILE *fp;

	fp = fopen(test_file, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(bytes, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
	return test_file;
}

/* Load path, expect exactly the error message want. */
static void
test_load_path_bad(const char *path, const char *want)
{
	char err[TEST_ERR_MAX] = "";
	struct config cfg;

	config_defaults(&cfg);
	assert_int_equal(config_load(&cfg, path, err, sizeof(err)), -1);
	if (strcmp(err, want) != 0)
		fail_msg("got  \"%s\"\nwant \"%s\"", err, want);
}

/* Load text over the defaults; fail the test on an error. */
static void
test_load_ok(const char *text, struct config *cfg)
{
	char err[TEST_ERR_MAX] = "";

	config_defaults(cfg);
	if (config_load(cfg, test_write(text), err, sizeof(err)) != 0)
		fail_msg("config_load: %s", err);
}

/* Load text, expect an error that is exactly "file:line: message". */
static void
test_load_bad(const char *text, int line, const char *message)
{
	char err[TEST_ERR_MAX] = "", want[TEST_ERR_MAX];
	struct config cfg;

	config_defaults(&cfg);
	assert_int_equal(config_load(&cfg, test_write(text), err,
	    sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:%d: %s", test_file, line, message);
	if (strcmp(err, want) != 0)
		fail_msg("got  \"%s\"\nwant \"%s\"", err, want);
}

static void
test_defaults(void **state)
{
	struct config cfg;

	config_defaults(&cfg);
	assert_string_equal(cfg.socket_path, "/run/sotto/sottod.sock");
	assert_int_equal(cfg.max_sessions, 16);
	assert_int_equal(cfg.max_frame_bytes, 1048576);
	assert_int_equal(cfg.max_client_buffer_bytes, 4 * 1048576);
	assert_int_equal(cfg.reconnect_grace_s, 30);
	assert_int_equal(cfg.max_connections, 256);
	assert_int_equal(cfg.max_connections_per_uid, 32);
	assert_int_equal(cfg.handshake_timeout_s, 10);
	assert_int_equal(cfg.idle_timeout_s, 120);
	assert_int_equal(cfg.shutdown_grace_s, 20);
	assert_int_equal(cfg.socket_mode, 0666);
	assert_string_equal(cfg.log_level, "info");
	assert_string_equal(cfg.model, "tiny.en");
	assert_int_equal(cfg.threads, 0);
	assert_string_equal(cfg.precision, "auto");
	assert_int_equal(cfg.step_ms, 1000);
	assert_int_equal(cfg.beam_size, 1);
	assert_string_equal(cfg.language, "auto");
	assert_int_equal(cfg.mic_enabled, 0);
	assert_string_equal(cfg.mic_device, "default");
	assert_int_equal(cfg.mic_rate, 16000);
	assert_int_equal(cfg.mic_channels, 1);
	assert_string_equal(cfg.mic_language, "auto");
}

/* An empty file and the shipped file (all comments) change nothing. */
static void
test_empty_and_shipped(void **state)
{
	char err[TEST_ERR_MAX] = "";
	struct config def, cfg;

	config_defaults(&def);
	test_load_ok("", &cfg);
	assert_memory_equal(&cfg, &def, sizeof(cfg));
	test_load_ok("# only a comment\n\n; another\n[server]\n", &cfg);
	assert_memory_equal(&cfg, &def, sizeof(cfg));
	config_defaults(&cfg);
	if (config_load(&cfg, SOTTOD_CONF_SOURCE, err, sizeof(err)) != 0)
		fail_msg("%s", err);
	assert_memory_equal(&cfg, &def, sizeof(cfg));
}

static const char test_every_key[] =
    "[server]\n"
    "socket = /tmp/s.sock\n"
    "max_sessions = 4\n"
    "max_frame_bytes = 64K\n"
    "max_client_buffer_bytes = 2MiB\n"
    "reconnect_grace_seconds = 0\n"
    "max_connections_per_uid = 3\n"
    "max_connections = 9\n"
    "handshake_timeout_seconds = 2\n"
    "idle_timeout_seconds = 0\n"
    "shutdown_grace_seconds = 5\n"
    "socket_mode = 0660\n"
    "log_level = debug\n"
    "\n"
    "[engine]\n"
    "model = /opt/models/base.gguf\n"
    "threads = 8\n"
    "precision = bf16\n"
    "step_ms = 500\n"
    "beam_size = 5\n"
    "language = auto\n"
    "[mic]\n"
    "  enabled = yes   ; inline comment\n"
    "device = hw:1,0\n"
    "rate = 48000\n"
    "channels = 2\n"
    "language = de\n"
    "[http]\n"
    "listen = [::1]:8000\n"
    "token = 0123456789abcdef-_.~+/=\n"
    "max_request_bytes = 100M\n"
    "request_timeout_seconds = 5\n"
    "beam_size = 1\n"
    "max_connections = 40\n"
    "max_connections_per_address = 4\n"
    "header_timeout_seconds = 7\n"
    "min_body_bytes_per_second = 2K\n";

static void
test_every_key_set(void **state)
{
	struct config cfg;

	test_load_ok(test_every_key, &cfg);
	assert_string_equal(cfg.socket_path, "/tmp/s.sock");
	assert_int_equal(cfg.max_sessions, 4);
	assert_int_equal(cfg.max_frame_bytes, 65536);
	assert_int_equal(cfg.max_client_buffer_bytes, 2 * 1048576);
	assert_int_equal(cfg.reconnect_grace_s, 0);
	assert_int_equal(cfg.max_connections_per_uid, 3);
	assert_int_equal(cfg.max_connections, 9);
	assert_int_equal(cfg.handshake_timeout_s, 2);
	assert_int_equal(cfg.idle_timeout_s, 0);
	assert_int_equal(cfg.shutdown_grace_s, 5);
	assert_int_equal(cfg.socket_mode, 0660);
	assert_string_equal(cfg.log_level, "debug");
	assert_string_equal(cfg.model, "/opt/models/base.gguf");
	assert_int_equal(cfg.threads, 8);
	assert_string_equal(cfg.precision, "bf16");
	assert_int_equal(cfg.step_ms, 500);
	assert_int_equal(cfg.beam_size, 5);
	assert_string_equal(cfg.language, "auto");
	assert_int_equal(cfg.mic_enabled, 1);
	assert_string_equal(cfg.mic_device, "hw:1,0");
	assert_int_equal(cfg.mic_rate, 48000);
	assert_int_equal(cfg.mic_channels, 2);
	assert_string_equal(cfg.mic_language, "de");
	assert_string_equal(cfg.http_listen, "[::1]:8000");
	assert_string_equal(cfg.http_token, "0123456789abcdef-_.~+/=");
	assert_int_equal(cfg.http_max_request_bytes, 100 * 1048576);
	assert_int_equal(cfg.http_timeout_s, 5);
	assert_int_equal(cfg.http_beam_size, 1);
	assert_int_equal(cfg.http_max_connections, 40);
	assert_int_equal(cfg.http_max_connections_per_address, 4);
	assert_int_equal(cfg.http_header_timeout_s, 7);
	assert_int_equal(cfg.http_min_body_rate, 2048);
}

/* [mic] language follows [engine] language unless set. */
static void
test_mic_language(void **state)
{
	struct config cfg;

	test_load_ok("[engine]\nlanguage = fr\n", &cfg);
	assert_string_equal(cfg.mic_language, "fr");
	test_load_ok("[mic]\nlanguage = es\n[engine]\nlanguage = fr\n", &cfg);
	assert_string_equal(cfg.mic_language, "es");
}

static void
test_values(void **state)
{
	static const char *const yes[] = { "yes", "YES", "true", "on", "1" };
	static const char *const no[] = { "no", "False", "off", "0" };
	char text[128];
	struct config cfg;
	size_t i;

	for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		snprintf(text, sizeof(text), "[mic]\nenabled = %s\n", yes[i]);
		test_load_ok(text, &cfg);
		assert_int_equal(cfg.mic_enabled, 1);
	}
	for (i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
		snprintf(text, sizeof(text), "[mic]\nenabled=%s\n", no[i]);
		test_load_ok(text, &cfg);
		assert_int_equal(cfg.mic_enabled, 0);
	}
	test_load_ok("[server]\nmax_frame_bytes = 4096\n"
	    "max_client_buffer_bytes = 1G\n", &cfg);
	assert_int_equal(cfg.max_frame_bytes, 4096);
	assert_int_equal(cfg.max_client_buffer_bytes, 1073741824);
	test_load_ok("[server]\nmax_frame_bytes = 64M\n", &cfg);
	assert_int_equal(cfg.max_frame_bytes, 64 * 1048576);
	test_load_ok("[server]\nmax_client_buffer_bytes = 4K\n"
	    "socket_mode = 600\nlog_level = warning\n", &cfg);
	assert_int_equal(cfg.max_client_buffer_bytes, 4096);
	assert_int_equal(cfg.socket_mode, 0600);
	assert_string_equal(cfg.log_level, "warning");
	test_load_ok("[engine]\nprecision = fp32\nlanguage = haw\n"
	    "model = base\n", &cfg);
	assert_string_equal(cfg.precision, "fp32");
	assert_string_equal(cfg.language, "haw");
	assert_string_equal(cfg.model, "base");
}

static void
test_unknown(void **state)
{
	test_load_bad("[server]\nsocket = /x\n[speaker]\nvolume = 3\n", 4,
	    "unknown section [speaker] (the sections: [server], [engine], "
	    "[mic], [http] or [wyoming])");
	test_load_bad("[engine]\n\nmodle = base\n", 3,
	    "unknown key \"modle\" in [engine]");
	test_load_bad("model = base\n", 1,
	    "\"model\" is outside a section: put it under [engine]");
	test_load_bad("beam_size = 2\n", 1, "\"beam_size\" is outside a "
	    "section: put it under [engine], [http] or [wyoming]");
	test_load_bad("token = x\n", 1, "\"token\" is outside a section: put "
	    "it under [http]");
	test_load_bad("volume = 3\n", 1, "\"volume\" is outside a section "
	    "(the sections: [server], [engine], [mic], [http] or [wyoming])");
	test_load_bad("[mic]\nrate = 16000\n\nrate = 48000\n", 4,
	    "rate: given twice in [mic] (first on line 2)");
	/* An indented line is a key of its own, not a continuation. */
	test_load_bad("[engine]\nmodel = base\n  model = tiny\n", 3,
	    "model: given twice in [engine] (first on line 2)");
}

static void
test_syntax(void **state)
{
	char text[400];

	test_load_bad("[server\nmax_sessions = 2\n", 1, "syntax error "
	    "(expected [section], key = value or a # comment)");
	test_load_bad("[server]\n# ok\nmax_sessions\n", 3, "syntax error "
	    "(expected [section], key = value or a # comment)");
	/* The first error wins, whichever part of the parser found it. */
	test_load_bad("[server]\nmax_sessions = 0\nbad line\n", 2,
	    "max_sessions: 0 is out of range (1 to 1024)");
	test_load_bad("[server]\nbad line\nmax_sessions = 0\n", 2,
	    "syntax error (expected [section], key = value or a # comment)");
	memset(text, 0, sizeof(text));
	memcpy(text, "[engine]\nmodel = ", 17);
	memset(text + 17, 'a', 300);
	text[317] = '\n';
	test_load_bad(text, 2, "line longer than 197 characters");
}

static void
test_bad_numbers(void **state)
{
	test_load_bad("[server]\nmax_sessions = 0\n", 2,
	    "max_sessions: 0 is out of range (1 to 1024)");
	test_load_bad("[server]\nmax_sessions = 1025\n", 2,
	    "max_sessions: 1025 is out of range (1 to 1024)");
	test_load_bad("[server]\nmax_sessions = many\n", 2,
	    "max_sessions: \"many\" is not a number");
	test_load_bad("[server]\nmax_sessions = 12abc\n", 2,
	    "max_sessions: \"12abc\" is not a whole number");
	test_load_bad("[engine]\nthreads = -1\n", 2,
	    "threads: -1 is out of range (0 to 1024)");
	test_load_bad("[engine]\nthreads = 99999999999999999999999\n", 2,
	    "threads: 99999999999999999999999 is too large");
	test_load_bad("[engine]\nstep_ms = 50\n", 2,
	    "step_ms: 50 is out of range (100 to 30000)");
	test_load_bad("[engine]\nbeam_size = 17\n", 2,
	    "beam_size: 17 is out of range (1 to 16)");
	test_load_bad("[server]\nreconnect_grace_seconds = 3601\n", 2,
	    "reconnect_grace_seconds: 3601 is out of range (0 to 3600)");
	test_load_bad("[mic]\nrate = 4000\n", 2,
	    "rate: 4000 is out of range (8000 to 192000)");
	test_load_bad("[mic]\nchannels = 0\n", 2,
	    "channels: 0 is out of range (1 to 32)");
	test_load_bad("[server]\nmax_connections_per_uid = 0\n", 2,
	    "max_connections_per_uid: 0 is out of range (1 to 4096)");
	test_load_bad("[http]\nlisten = 8000\n", 2,
	    "listen: \"8000\" is not ADDRESS:PORT (such as 127.0.0.1:8000 "
	    "or [::1]:8000; port 0 to 65535)");
	test_load_bad("[http]\ntoken = short\n", 2,
	    "token: a token is 16 to 255 printable ASCII characters "
	    "without blanks");
	test_load_bad("[http]\ntoken = 0123456789abcdef ghi\n", 2,
	    "token: a token is 16 to 255 printable ASCII characters "
	    "without blanks");
	test_load_bad("[http]\nlisten = example.com:80\n", 2,
	    "listen: \"example.com:80\": the address is not a numeric "
	    "IPv4 address, [IPv6] address or localhost");
	test_load_bad("[server]\nmax_connections = 0\n", 2,
	    "max_connections: 0 is out of range (1 to 65536)");
	test_load_bad("[server]\nmax_connections = 65537\n", 2,
	    "max_connections: 65537 is out of range (1 to 65536)");
	test_load_bad("[server]\nhandshake_timeout_seconds = 0\n", 2,
	    "handshake_timeout_seconds: 0 is out of range (1 to 3600)");
	test_load_bad("[server]\nidle_timeout_seconds = 86401\n", 2,
	    "idle_timeout_seconds: 86401 is out of range (0 to 86400)");
	test_load_bad("[server]\nidle_timeout_seconds = -1\n", 2,
	    "idle_timeout_seconds: -1 is out of range (0 to 86400)");
	test_load_bad("[server]\nshutdown_grace_seconds = 3601\n", 2,
	    "shutdown_grace_seconds: 3601 is out of range (0 to 3600)");
}

static void
test_bad_sizes(void **state)
{
	test_load_bad("[server]\nmax_frame_bytes = 1T\n", 2,
	    "max_frame_bytes: \"1T\" is not a size (bytes, or a number "
	    "followed by K, M or G)");
	test_load_bad("[server]\nmax_frame_bytes = 100\n", 2,
	    "max_frame_bytes: 100 is out of range (4096 to 67108864 bytes)");
	test_load_bad("[server]\nmax_frame_bytes = 65M\n", 2,
	    "max_frame_bytes: 65M is out of range (4096 to 67108864 bytes)");
	test_load_bad("[server]\nmax_client_buffer_bytes = -4M\n", 2,
	    "max_client_buffer_bytes: -4M is out of range (4096 to "
	    "1073741824 bytes)");
	test_load_bad("[server]\nmax_client_buffer_bytes = 4095\n", 2,
	    "max_client_buffer_bytes: 4095 is out of range (4096 to "
	    "1073741824 bytes)");
	test_load_bad("[server]\nmax_client_buffer_bytes = "
	    "18014398509481984G\n", 2, "max_client_buffer_bytes: "
	    "18014398509481984G is out of range (4096 to 1073741824 bytes)");
}

static void
test_bad_strings(void **state)
{
	struct config cfg;
	char text[400];

	test_load_bad("[mic]\nenabled = maybe\n", 2,
	    "enabled: \"maybe\" is not yes or no");
	test_load_bad("[engine]\nprecision = fp16\n", 2,
	    "precision: \"fp16\" is not auto, fp32, bf16 or int8");
	test_load_bad("[engine]\nlanguage = English\n", 2,
	    "language: \"English\" is not a language code (en, de, ...) "
	    "or auto");
	test_load_bad("[mic]\nlanguage = e\n", 2,
	    "language: \"e\" is not a language code (en, de, ...) or auto");
	test_load_bad("[engine]\nmodel =\n", 2, "model: empty value");
	test_load_bad("[server]\nlog_level = verbose\n", 2,
	    "log_level: \"verbose\" is not warning, info or debug");
	test_load_bad("[server]\nsocket_mode = 0888\n", 2,
	    "socket_mode: \"0888\" is not an octal mode such as 0660 (at "
	    "most 0777)");
	test_load_bad("[server]\nsocket_mode = 1777\n", 2,
	    "socket_mode: \"1777\" is not an octal mode such as 0660 (at "
	    "most 0777)");
	test_load_bad("[server]\nsocket_mode = 66\n", 2,
	    "socket_mode: \"66\" is not an octal mode such as 0660 (at "
	    "most 0777)");
	/* tests/fuzz/corpus/config/crash-value-semicolon: "socket =;=" */
	test_load_bad("[server]\nsocket =;=\n", 2, "socket: a value cannot "
	    "start with ';' (\" ;\" starts a comment)");
	test_load_bad("[engine]\nmodel =;x ; y\n", 2, "model: a value cannot "
	    "start with ';' (\" ;\" starts a comment)");
	test_load_ok("[engine]\nmodel = a;b ; comment\n", &cfg);
	assert_string_equal(cfg.model, "a;b");
	snprintf(text, sizeof(text), "[server]\nsocket = /%0120d\n", 0);
	test_load_bad(text, 2, "socket: value too long (121 bytes, at most "
	    "107)");
}

static void
test_missing_file(void **state)
{
	char err[TEST_ERR_MAX] = "", want[TEST_ERR_MAX];
	struct config cfg;

	config_defaults(&cfg);
	assert_int_equal(config_load(&cfg, "/nonexistent/sottod.conf", err,
	    sizeof(err)), -1);
	snprintf(want, sizeof(want), "/nonexistent/sottod.conf: %s",
	    strerror(ENOENT));
	assert_string_equal(err, want);
}

/* A NUL byte is named as such, on its line, wherever it is. */
static void
test_nul_byte(void **state)
{
	static const char nul_value[] = "[server]\nmax_sessions = 2\0junk\n";
	static const char nul_first[] = "[server]\n\n\0\n";
	char err[TEST_ERR_MAX] = "", want[TEST_ERR_MAX];
	struct config cfg;

	config_defaults(&cfg);
	assert_int_equal(config_load(&cfg, test_write_bytes(nul_value,
	    sizeof(nul_value) - 1), err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:2: NUL byte at column 17 (a config "
	    "file is text)", test_file);
	assert_string_equal(err, want);
	assert_int_equal(config_load(&cfg, test_write_bytes(nul_first,
	    sizeof(nul_first) - 1), err, sizeof(err)), -1);
	snprintf(want, sizeof(want), "%s:3: NUL byte at column 1 (a config "
	    "file is text)", test_file);
	assert_string_equal(err, want);
}

/*
 * Only a regular file is read: a FIFO would block the open (and a SIGHUP
 * with it) until a writer came; /dev/zero never ends.
 */
static void
test_not_a_regular_file(void **state)
{
	char want[TEST_ERR_MAX];

	unlink(test_other);
	assert_int_equal(mkfifo(test_other, 0600), 0);
	snprintf(want, sizeof(want), "%s: not a regular file (a FIFO)",
	    test_other);
	test_load_path_bad(test_other, want);
	unlink(test_other);
	assert_int_equal(symlink("/dev/zero", test_other), 0);
	snprintf(want, sizeof(want), "%s: not a regular file (a character "
	    "device)", test_other);
	test_load_path_bad(test_other, want);
	unlink(test_other);
	assert_int_equal(mkdir(test_other, 0700), 0);
	snprintf(want, sizeof(want), "%s: not a regular file (a directory)",
	    test_other);
	test_load_path_bad(test_other, want);
	assert_int_equal(rmdir(test_other), 0);
}

/* A file of 1 MiB (comments) is read; one byte more is refused. */
static void
test_size_bound(void **state)
{
	size_t max = 1024 * 1024, i;
	char err[TEST_ERR_MAX] = "", want[TEST_ERR_MAX], *text;
	struct config cfg;

	text = malloc(max + 1);
	assert_non_null(text);
	for (i = 0; i < max + 1; i++)
		text[i] = i % 64 == 63 ? '\n' : i % 64 == 0 ? '#' : 'x';
	config_defaults(&cfg);
	if (config_load(&cfg, test_write_bytes(text, max), err,
	    sizeof(err)) != 0)
		fail_msg("1 MiB of comments: %s", err);
	snprintf(want, sizeof(want), "%s: %zu bytes, larger than a config "
	    "file can be (%zu)", test_file, max + 1, max);
	test_load_path_bad(test_write_bytes(text, max + 1), want);
	free(text);
}

/* config_dump prints a file that loads back to the same values. */
static void
test_dump_round_trip(void **state)
{
	struct config cfg, back;
	char *text = NULL;
	size_t len = 0;
	FILE *fp;

	test_load_ok(test_every_key, &cfg);
	fp = open_memstream(&text, &len);
	assert_non_null(fp);
	config_dump(&cfg, fp);
	assert_int_equal(fclose(fp), 0);
	assert_non_null(strstr(text, "[server]\n"));
	assert_non_null(strstr(text, "\nsocket = /tmp/s.sock\n"));
	assert_non_null(strstr(text, "max_frame_bytes = 64K\n"));
	assert_non_null(strstr(text, "enabled = yes\n"));
	assert_non_null(strstr(text, "socket_mode = 0660\n"));
	test_load_ok(text, &back);
	assert_memory_equal(&cfg, &back, sizeof(cfg));
	free(text);
}

struct test_diff {
	char	 seen[512];
	int	 live, restart;
};

static void
test_diff_cb(const char *section, const char *key, const char *old,
    const char *new, int live, void *arg)
{
	struct test_diff *d = arg;
	size_t len = strlen(d->seen);

	snprintf(d->seen + len, sizeof(d->seen) - len, "[%s] %s %s>%s %s\n",
	    section, key, old, new, live ? "live" : "restart");
	if (live)
		d->live++;
	else
		d->restart++;
}

/* SIGHUP: which keys differ, which apply live, which keep the old value. */
static void
test_diff_and_keep(void **state)
{
	struct test_diff d;
	struct config old, new, def;

	config_defaults(&old);
	config_defaults(&def);
	memset(&d, 0, sizeof(d));
	assert_int_equal(config_diff(&old, &def, test_diff_cb, &d), 0);
	test_load_ok("[server]\nmax_sessions = 2\nsocket = /tmp/other\n"
	    "max_client_buffer_bytes = 64K\nlog_level = debug\n"
	    "[engine]\nmodel = base\nstep_ms = 500\n"
	    "[mic]\ndevice = hw:2\n", &new);
	assert_int_equal(config_diff(&old, &new, test_diff_cb, &d), 7);
	assert_string_equal(d.seen,
	    "[engine] model tiny.en>base live\n"
	    "[engine] step_ms 1000>500 live\n"
	    "[mic] device default>hw:2 restart\n"
	    "[server] log_level info>debug live\n"
	    "[server] max_client_buffer_bytes 4M>64K live\n"
	    "[server] max_sessions 16>2 live\n"
	    "[server] socket /run/sotto/sottod.sock>/tmp/other restart\n");
	assert_int_equal(d.live, 5);
	assert_int_equal(d.restart, 2);
	config_keep_restart_keys(&new, &old);
	assert_int_equal(new.max_sessions, 2);
	assert_int_equal(new.step_ms, 500);
	assert_int_equal(new.max_client_buffer_bytes, 65536);
	assert_string_equal(new.log_level, "debug");
	assert_string_equal(new.model, "base");	/* reload.c loads it */
	assert_string_equal(new.mic_device, "default");
	assert_string_equal(new.socket_path, "/run/sotto/sottod.sock");
	/* Only the live keys differ now. */
	memset(&d, 0, sizeof(d));
	assert_int_equal(config_diff(&old, &new, test_diff_cb, &d), 5);
	assert_int_equal(d.restart, 0);
}

/* The limits and timeouts of connections all apply on SIGHUP. */
static void
test_limits_live(void **state)
{
	struct test_diff d;
	struct config old, new;

	config_defaults(&old);
	memset(&d, 0, sizeof(d));
	test_load_ok("[server]\nmax_connections = 10\n"
	    "handshake_timeout_seconds = 4\nidle_timeout_seconds = 0\n"
	    "shutdown_grace_seconds = 3\n", &new);
	assert_int_equal(config_diff(&old, &new, test_diff_cb, &d), 4);
	assert_string_equal(d.seen,
	    "[server] handshake_timeout_seconds 10>4 live\n"
	    "[server] idle_timeout_seconds 120>0 live\n"
	    "[server] max_connections 256>10 live\n"
	    "[server] shutdown_grace_seconds 20>3 live\n");
	assert_int_equal(d.restart, 0);
	config_keep_restart_keys(&new, &old);
	assert_int_equal(new.max_connections, 10);
	assert_int_equal(new.handshake_timeout_s, 4);
	assert_int_equal(new.idle_timeout_s, 0);
	assert_int_equal(new.shutdown_grace_s, 3);
}

/* [wyoming]: its keys, and a dump that reads back. */
static void
test_wyoming(void **state)
{
	struct config cfg, back;
	char *dump = NULL;
	size_t len = 0;
	FILE *fp;

	test_load_ok("", &cfg);
	assert_string_equal(cfg.wyoming_listen, "");
	assert_int_equal(cfg.wyoming_max_event_bytes, 1048576);
	assert_int_equal(cfg.wyoming_max_utterance_s, 120);
	assert_int_equal(cfg.wyoming_beam_size, 5);
	assert_int_equal(cfg.wyoming_max_connections, 64);
	assert_int_equal(cfg.wyoming_max_connections_per_address, 16);
	assert_string_equal(cfg.wyoming_answer, "live");
	test_load_ok("[wyoming]\nlisten = [::1]:10300\nmax_event_bytes = 64K\n"
	    "max_utterance_seconds = 30\nbeam_size = 1\nmax_connections = 9\n"
	    "max_connections_per_address = 2\nanswer = whole\n", &cfg);
	assert_string_equal(cfg.wyoming_answer, "whole");
	assert_int_equal(cfg.wyoming_max_connections, 9);
	assert_int_equal(cfg.wyoming_max_connections_per_address, 2);
	assert_int_equal(cfg.wyoming_beam_size, 1);
	assert_string_equal(cfg.wyoming_listen, "[::1]:10300");
	assert_int_equal(cfg.wyoming_max_event_bytes, 65536);
	assert_int_equal(cfg.wyoming_max_utterance_s, 30);
	test_load_bad("[wyoming]\nlisten = 10300\n", 2, "listen: \"10300\" is "
	    "not ADDRESS:PORT (such as 127.0.0.1:8000 or [::1]:8000; port 0 "
	    "to 65535)");
	test_load_bad("[wyoming]\nmax_utterance_seconds = 0\n", 2,
	    "max_utterance_seconds: 0 is out of range (1 to 3600)");
	test_load_bad("[wyoming]\nmax_event_bytes = 1K\n", 2,
	    "max_event_bytes: 1K is out of range (4096 to 67108864 bytes)");
	test_load_bad("[wyoming]\nanswer = fast\n", 2, "answer: \"fast\" is "
	    "not live (finish the live session) or whole (decode the "
	    "utterance again)");
	test_load_ok("[wyoming]\nlisten = 0.0.0.0:10300\n", &cfg);
	fp = open_memstream(&dump, &len);
	assert_non_null(fp);
	config_dump(&cfg, fp);
	assert_int_equal(fclose(fp), 0);
	assert_non_null(strstr(dump, "\n[wyoming]\nanswer = live\n"
	    "beam_size = 5\nlisten = "
	    "0.0.0.0:10300\nmax_connections = 64\n"
	    "max_connections_per_address = 16\nmax_event_bytes = 1M\n"
	    "max_utterance_seconds = 120\n"));
	test_load_ok(dump, &back);
	assert_memory_equal(&cfg, &back, sizeof(cfg));
	free(dump);
}

static int
test_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(test_dir, sizeof(test_dir), "%s/test-config.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	if (mkdtemp(test_dir) == NULL)
		return -1;
	snprintf(test_file, sizeof(test_file), "%s/sottod.conf", test_dir);
	snprintf(test_other, sizeof(test_other), "%s/other", test_dir);
	return 0;
}

static int
test_teardown(void **state)
{
	unlink(test_file);
	unlink(test_other);
	rmdir(test_dir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_limits_live),
		cmocka_unit_test(test_empty_and_shipped),
		cmocka_unit_test(test_every_key_set),
		cmocka_unit_test(test_mic_language),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_unknown),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_bad_strings),
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_not_a_regular_file),
		cmocka_unit_test(test_size_bound),
		cmocka_unit_test(test_dump_round_trip),
		cmocka_unit_test(test_diff_and_keep),
		cmocka_unit_test(test_wyoming),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
