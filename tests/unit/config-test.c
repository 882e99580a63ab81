/*
 * The config tests' scratch directory and loads (config-test.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include "config-test.h"

char test_dir[256];
char test_file[300];
char test_other[300];

/* Every key set to a value other than its default. */
const char test_every_key[] =
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
    "diarize = yes\n"
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

const char *
test_write(const char *text)
{
	FILE *fp;

	fp = fopen(test_file, "w");
	assert_non_null(fp);
	assert_int_equal(fputs(text, fp) >= 0, 1);
	assert_int_equal(fclose(fp), 0);
	return test_file;
}

const char *
test_write_bytes(const char *bytes, size_t len)
{
	FILE *fp;

	fp = fopen(test_file, "w");
	assert_non_null(fp);
	assert_int_equal(fwrite(bytes, 1, len, fp), len);
	assert_int_equal(fclose(fp), 0);
	return test_file;
}

void
test_load_path_bad(const char *path, const char *want)
{
	char err[TEST_ERR_MAX] = "";
	struct config cfg;

	config_defaults(&cfg);
	assert_int_equal(config_load(&cfg, path, err, sizeof(err)), -1);
	if (strcmp(err, want) != 0)
		fail_msg("got  \"%s\"\nwant \"%s\"", err, want);
}

void
test_load_ok(const char *text, struct config *cfg)
{
	char err[TEST_ERR_MAX] = "";

	config_defaults(cfg);
	if (config_load(cfg, test_write(text), err, sizeof(err)) != 0)
		fail_msg("config_load: %s", err);
}

void
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

int
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

int
test_teardown(void **state)
{
	unlink(test_file);
	unlink(test_other);
	rmdir(test_dir);
	return 0;
}
