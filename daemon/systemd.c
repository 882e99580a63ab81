/*
 * systemd glue, after tmux's compat/systemd.c and redis's
 * redisCommunicateSystemd: sd_listen_fds for activation, sd_notify for state.
 * sd_notify returns 0 when NOTIFY_SOCKET is unset (not under systemd); that
 * and any failure are only logged at debug level, as a missing notification
 * must never stop the daemon.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "systemd.h"

int
systemd_listen_fd(char *err, size_t errlen)
{
	int fd = SD_LISTEN_FDS_START;
	int n, r;

	/* unset_environment: children (none today) must not see them. */
	n = sd_listen_fds(1);
	if (n < 0) {
		snprintf(err, errlen, "socket activation: %s", strerror(-n));
		return -2;
	}
	if (n == 0)
		return -1;
	if (n > 1) {
		snprintf(err, errlen, "socket activation: %d sockets passed, "
		    "expected one (sottod.socket needs exactly one "
		    "ListenStream=)", n);
		return -2;
	}
	r = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);
	if (r < 0) {
		snprintf(err, errlen, "socket activation: fd %d: %s", fd,
		    strerror(-r));
		return -2;
	}
	if (r == 0) {
		snprintf(err, errlen, "socket activation: fd %d is not a "
		    "listening Unix stream socket (use ListenStream=PATH)", fd);
		return -2;
	}
	return fd;
}

static void
systemd_notify(const char *state)
{
	int r;

	r = sd_notify(0, state);
	if (r < 0)
		log_debug("sd_notify: %s", strerror(-r));
}

/* A newline in STATUS= would start another assignment: flatten it. */
static void
systemd_flatten(char *s)
{
	for (; *s != '\0'; s++) {
		if (*s == '\n')
			*s = ' ';
	}
}

void
systemd_notify_ready(const char *status)
{
	char buf[512];

	if (status == NULL) {
		systemd_notify("READY=1");
		return;
	}
	snprintf(buf, sizeof(buf) - sizeof("\nREADY=1"), "STATUS=%s", status);
	systemd_flatten(buf);
	/* READY=1 last, so the status is set when the manager sees it. */
	strncat(buf, "\nREADY=1", sizeof(buf) - strlen(buf) - 1);
	systemd_notify(buf);
}

void
systemd_notify_status(const char *fmt, ...)
{
	char buf[512];
	va_list ap;
	int n;

	n = snprintf(buf, sizeof(buf), "STATUS=");
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
	va_end(ap);
	systemd_flatten(buf);
	systemd_notify(buf);
}

/* SIGHUP: RELOADING=1 with the time systemd pairs with the next READY=1. */
void
systemd_notify_reloading(void)
{
	struct timespec ts;
	char buf[64];

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, sizeof(buf), "RELOADING=1\nMONOTONIC_USEC=%llu",
	    (unsigned long long)ts.tv_sec * 1000000ULL +
	    (unsigned long long)ts.tv_nsec / 1000);
	systemd_notify(buf);
}

void
systemd_notify_stopping(void)
{
	systemd_notify("STOPPING=1");
}

int
systemd_watchdog_interval_usec(uint64_t *ret)
{
	uint64_t usec = 0;
	int r;

	r = sd_watchdog_enabled(0, &usec);
	if (r < 0) {
		log_warnx("watchdog: bad WATCHDOG_USEC: %s", strerror(-r));
		return 0;
	}
	if (r == 0 || usec == 0)
		return 0;
	*ret = usec;
	return 1;
}

void
systemd_notify_watchdog(void)
{
	systemd_notify("WATCHDOG=1");
}
