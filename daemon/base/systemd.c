/*
 * systemd glue, after tmux's compat/systemd.c and redis's
 * redisCommunicateSystemd: sd_listen_fds_with_names for activation (the
 * Unix socket, and the TCP ones named http and wyoming), sd_notify for
 * state.
 * sd_notify returns 0 when NOTIFY_SOCKET is unset (not under systemd); that
 * and any failure are only logged at debug level, as a missing notification
 * must never stop the daemon.
 */
#include <sys/socket.h>

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "systemd.h"

/* Which of fds a passed fd named name is; NULL with err. */
static int *
systemd_fd_slot(struct systemd_fds *fds, int fd, const char *name,
    char *err, size_t errlen)
{
	int tcp, r;

	tcp = sd_is_socket_inet(fd, AF_UNSPEC, SOCK_STREAM, 1, 0);
	if (tcp > 0 && strcmp(name, "http") == 0)
		return &fds->http;
	if (tcp > 0 && strcmp(name, "wyoming") == 0)
		return &fds->wyoming;
	if (tcp > 0) {
		snprintf(err, errlen, "socket activation: fd %d (name '%s') "
		    "is a TCP socket: name it FileDescriptorName=http or "
		    "FileDescriptorName=wyoming in its socket unit", fd, name);
		return NULL;
	}
	r = sd_is_socket_unix(fd, SOCK_STREAM, 1, NULL, 0);
	if (r > 0 && strcmp(name, "http") != 0 &&
	    strcmp(name, "wyoming") != 0)
		return &fds->socket;
	if (r < 0)
		snprintf(err, errlen, "socket activation: fd %d: %s", fd,
		    strerror(-r));
	else
		snprintf(err, errlen, "socket activation: fd %d (name '%s') "
		    "is not a listening %s stream socket (use ListenStream=%s)",
		    fd, name, strcmp(name, "http") == 0 ||
		    strcmp(name, "wyoming") == 0 ? "TCP" : "Unix",
		    strcmp(name, "http") == 0 || strcmp(name, "wyoming") == 0 ?
		    "ADDR:PORT" : "PATH");
	return NULL;
}

int
systemd_listen_fds(struct systemd_fds *fds, char *err, size_t errlen)
{
	char **names = NULL;
	int i, n, *slot, rc = 0;

	fds->socket = fds->http = fds->wyoming = -1;
	/* unset_environment: children (none today) must not see them. */
	n = sd_listen_fds_with_names(1, &names);
	if (n < 0) {
		snprintf(err, errlen, "socket activation: %s", strerror(-n));
		return -1;
	}
	for (i = 0; i < n && rc == 0; i++) {
		slot = systemd_fd_slot(fds, SD_LISTEN_FDS_START + i,
		    names != NULL && names[i] != NULL ? names[i] : "unknown",
		    err, errlen);
		if (slot == NULL)
			rc = -1;
		else if (*slot != -1) {
			snprintf(err, errlen, "socket activation: fds %d and "
			    "%d are both the %s socket (one ListenStream= "
			    "each)", *slot, SD_LISTEN_FDS_START + i,
			    slot == &fds->http ? "http" : slot ==
			    &fds->wyoming ? "wyoming" : "Unix");
			rc = -1;
		} else
			*slot = SD_LISTEN_FDS_START + i;
	}
	for (i = 0; names != NULL && i < n; i++)
		free(names[i]);
	free(names);
	return rc;
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
