/*
 * Unit tests for daemon/base/config.c: defaults, every key and its values,
 * the shipped conf/sottod.conf, and bad lines whose messages must name
 * file and line. The file itself (missing, not regular, too big, NUL
 * bytes), the dump and the reload's diff and live keys:
 * test-config-file.c.
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
#include "config-test.h"

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
	assert_int_equal(cfg.mic_diarize, 0);
}

/* The limits and timeouts of connections all apply on SIGHUP. */
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
	assert_int_equal(cfg.mic_diarize, 1);
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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_empty_and_shipped),
		cmocka_unit_test(test_every_key_set),
		cmocka_unit_test(test_mic_language),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_unknown),
		cmocka_unit_test(test_syntax),
		cmocka_unit_test(test_bad_numbers),
		cmocka_unit_test(test_bad_sizes),
		cmocka_unit_test(test_bad_strings),
		cmocka_unit_test(test_wyoming),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
