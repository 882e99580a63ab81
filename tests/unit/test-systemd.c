/*
 * Unit tests for daemon/base/systemd.c (socket activation as systemd passes it:
 * LISTEN_PID, LISTEN_FDS and fd 3) and daemon/base/log.c (journal prefixes).
 */
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <netinet/in.h>

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

/* A listening TCP socket on 127.0.0.1, any port. */
static int
test_tcp_socket(void)
{
	struct sockaddr_in sin;
	int fd;

	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(fd, 4), 0);
	return fd;
}

/* Put fd[0..n-1] at 3, 4, ... (by way of fds out of their way). */
static void
test_place(const int *fd, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		assert_int_equal(dup2(fd[i], 40 + i), 40 + i);
		close(fd[i]);
	}
	for (i = 0; i < n; i++) {
		assert_int_equal(dup2(40 + i, 3 + i), 3 + i);
		close(40 + i);
	}
}

static void
test_not_activated(void **state)
{
	struct systemd_fds fds;
	char err[TEST_ERR_MAX] = "";

	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
	assert_int_equal(systemd_listen_fds(&fds, err, sizeof(err)), 0);
	assert_int_equal(fds.socket, -1);
	assert_int_equal(fds.http, -1);
	assert_int_equal(fds.wyoming, -1);
}

static void
test_activated(void **state)
{
	struct systemd_fds fds;
	char err[TEST_ERR_MAX] = "";

	unsetenv("LISTEN_FDNAMES");
	test_pass(test_unix_socket(SOCK_STREAM, 1), 1);
	if (systemd_listen_fds(&fds, err, sizeof(err)) != 0)
		fail_msg("systemd_listen_fds: %s", err);
	assert_int_equal(fds.socket, 3);
	assert_int_equal(fds.http, -1);
	assert_int_equal(fds.wyoming, -1);
	/* The variables are consumed. */
	assert_null(getenv("LISTEN_FDS"));
	close(3);
}

/* sottod.socket, sottod-http.socket and sottod-wyoming.socket at once. */
static void
test_named(void **state)
{
	struct systemd_fds fds;
	char err[TEST_ERR_MAX] = "";
	int fd[3];

	/* systemd's order is its own: the names say which is which */
	fd[0] = test_tcp_socket();
	fd[1] = test_tcp_socket();
	fd[2] = test_unix_socket(SOCK_STREAM, 1);
	test_place(fd, 3);
	test_pass(3, 3);
	setenv("LISTEN_FDNAMES", "wyoming:http:sottod.socket", 1);
	if (systemd_listen_fds(&fds, err, sizeof(err)) != 0)
		fail_msg("systemd_listen_fds: %s", err);
	assert_int_equal(fds.wyoming, 3);
	assert_int_equal(fds.http, 4);
	assert_int_equal(fds.socket, 5);
	assert_null(getenv("LISTEN_FDNAMES"));
	close(3);
	close(4);
	close(5);
}

static void
test_wrong_sockets(void **state)
{
	struct systemd_fds fds;
	char err[TEST_ERR_MAX] = "";

	unsetenv("LISTEN_FDNAMES");
	test_pass(test_unix_socket(SOCK_STREAM, 0), 1);
	assert_int_equal(systemd_listen_fds(&fds, err, sizeof(err)), -1);
	if (strstr(err, "not a listening Unix stream socket") == NULL)
		fail_msg("%s", err);
	close(3);
	test_pass(test_unix_socket(SOCK_DGRAM, 0), 1);
	assert_int_equal(systemd_listen_fds(&fds, err, sizeof(err)), -1);
	close(3);
	/* two Unix sockets */
	test_pass(test_unix_socket(SOCK_STREAM, 1), 2);
	assert_int_equal(dup2(3, 4), 4);
	assert_int_equal(systemd_listen_fds(&fds, err, sizeof(err)), -1);
	if (strstr(err, "fds 3 and 4 are both the Unix socket") == NULL)
		fail_msg("%s", err);
	close(4);
	close(3);
	/* a TCP socket without a name */
	test_pass(test_tcp_socket(), 1);
	assert_int_equal(systemd_listen_fds(&fds, err, sizeof(err)), -1);
	if (strstr(err, "FileDescriptorName=http") == NULL)
		fail_msg("%s", err);
	close(3);
	/* a Unix socket named http */
	test_pass(test_unix_socket(SOCK_STREAM, 1), 1);
	setenv("LISTEN_FDNAMES", "http", 1);
	assert_int_equal(systemd_listen_fds(&fds, err, sizeof(err)), -1);
	if (strstr(err, "not a listening TCP stream socket") == NULL)
		fail_msg("%s", err);
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
		cmocka_unit_test(test_named),
		cmocka_unit_test(test_wrong_sockets),
		cmocka_unit_test(test_notify_without_systemd),
		cmocka_unit_test(test_log),
	};

	return cmocka_run_group_tests(tests, test_setup, test_teardown);
}
