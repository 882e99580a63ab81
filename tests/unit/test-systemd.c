/*
 * Unit tests for daemon/systemd.c (socket activation as systemd passes it:
 * LISTEN_PID, LISTEN_FDS and fd 3) and daemon/log.c (journal prefixes).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "log.h"
#include "systemd.h"

#define TEST_ERR_MAX	512

static char test_dir[80];

/* Put fd at 3 and pretend systemd passed n fds to this process. */
static void
test_pass(int fd, int n)
{
	char buf[32];

	if (fd != 3) {
		assert_int_equal(dup2(fd, 3), 3);
		close(fd);
	}
	snprintf(buf, sizeof(buf), "%d", (int)getpid());
	setenv("LISTEN_PID", buf, 1);
	snprintf(buf, sizeof(buf), "%d", n);
	setenv("LISTEN_FDS", buf, 1);
}

static int
test_unix_socket(int type, int do_listen)
{
	struct sockaddr_un sun;
	int fd;

	fd = socket(AF_UNIX, type, 0);
	assert_true(fd >= 0);
	memset(&sun, 0, sizeof(sun));
	sun.sun_family = AF_UNIX;
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/s%d", test_dir,
	    type);
	unlink(sun.sun_path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	if (do_listen)
		assert_int_equal(listen(fd, 4), 0);
	return fd;
}

static void
test_not_activated(void **state)
{
	char err[TEST_ERR_MAX] = "";

	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	assert_int_equal(systemd_listen_fd(err, sizeof(err)), -1);
}

static void
test_activated(void **state)
{
	char err[TEST_ERR_MAX] = "";

	test_pass(test_unix_socket(SOCK_STREAM, 1), 1);
	if (systemd_listen_fd(err, sizeof(err)) != 3)
		fail_msg("systemd_listen_fd: %s", err);
	/* The variables are consumed. */
	assert_null(getenv("LISTEN_FDS"));
	close(3);
}

static void
test_wrong_sockets(void **state)
{
	char err[TEST_ERR_MAX] = "";

	test_pass(test_unix_socket(SOCK_STREAM, 0), 1);
	assert_int_equal(systemd_listen_fd(err, sizeof(err)), -2);
	if (strstr(err, "not a listening Unix stream socket") == NULL)
		fail_msg("%s", err);
	close(3);
	test_pass(test_unix_socket(SOCK_DGRAM, 0), 1);
	assert_int_equal(systemd_listen_fd(err, sizeof(err)), -2);
	close(3);
	test_pass(test_unix_socket(SOCK_STREAM, 1), 2);
	assert_int_equal(dup2(3, 4), 4);
	assert_int_equal(systemd_listen_fd(err, sizeof(err)), -2);
	close(4);
	assert_non_null(strstr(err, "2 sockets passed, expected one"));
	close(3);
}

static void
test_notify_without_systemd(void **state)
{
	uint64_t usec = 7;

	unsetenv("NOTIFY_SOCKET");
	unsetenv("WATCHDOG_USEC");
	systemd_notify_ready("loaded\nmodel");
	systemd_notify_status("%d sessions", 3);
	systemd_notify_watchdog();
	systemd_notify_stopping();
	assert_int_equal(systemd_watchdog_interval_usec(&usec), 0);
	assert_int_equal(usec, 7);
	setenv("WATCHDOG_USEC", "30000000", 1);
	unsetenv("WATCHDOG_PID");
	assert_int_equal(systemd_watchdog_interval_usec(&usec), 1);
	assert_int_equal(usec, 30000000);
	unsetenv("WATCHDOG_USEC");
}

/* Run the log calls with stderr sent to a file; return what was written. */
static char *
test_log_capture(int journal)
{
	static char text[4096];
	char path[512], env[64];
	struct stat st;
	int fd, saved;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/log", test_dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	snprintf(env, sizeof(env), "%llu:%llu", (unsigned long long)st.st_dev,
	    (unsigned long long)st.st_ino);
	if (journal)
		setenv("JOURNAL_STREAM", env, 1);
	else
		unsetenv("JOURNAL_STREAM");
	saved = dup(STDERR_FILENO);
	dup2(fd, STDERR_FILENO);
	log_init("sottod-test", 0);
	log_info("info %d", 1);
	log_debug("hidden");
	log_setdebug(1);
	log_debug("debug");
	errno = ENOENT;
	log_warn("open %s", "x");
	log_warnx("plain");
	dup2(saved, STDERR_FILENO);
	close(saved);
	n = pread(fd, text, sizeof(text) - 1, 0);
	close(fd);
	unlink(path);
	assert_true(n >= 0);
	text[n] = '\0';
	unsetenv("JOURNAL_STREAM");
	return text;
}

static void
test_log(void **state)
{
	char want[512];

	snprintf(want, sizeof(want), "sottod-test: info 1\n"
	    "sottod-test: debug\nsottod-test: open x: %s\n"
	    "sottod-test: plain\n", strerror(ENOENT));
	assert_string_equal(test_log_capture(0), want);
	snprintf(want, sizeof(want), "<6>info 1\n<7>debug\n<4>open x: %s\n"
	    "<4>plain\n", strerror(ENOENT));
	assert_string_equal(test_log_capture(1), want);
}

static int
test_setup(void **state)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(test_dir, sizeof(test_dir), "%s/test-systemd.XXXXXX",
	    tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
	return mkdtemp(test_dir) == NULL ? -1 : 0;
}

static int
test_teardown(void **state)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/s%d", test_dir, SOCK_STREAM);
	unlink(path);
	snprintf(path, sizeof(path), "%s/s%d", test_dir, SOCK_DGRAM);
	unlink(path);
	rmdir(test_dir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_not_activated),
		cmocka_unit_test(test_activated),
		cmocka_unit_test(test_wrong_sockets),
		cmocka_unit_test(test_notify_without_systemd),
		cmocka_unit_test(test_log),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
