/*
 * Unit tests for daemon/base/config.c's files: missing, not a regular
 * file, NUL bytes, over the size bound; config_dump() read back as it was;
 * config_diff(), what a reload keeps and which keys it applies.
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

/* An empty file and the shipped file (all comments) change nothing. */

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_missing_file),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_not_a_regular_file),
		cmocka_unit_test(test_size_bound),
		cmocka_unit_test(test_dump_round_trip),
		cmocka_unit_test(test_diff_and_keep),
		cmocka_unit_test(test_limits_live),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
