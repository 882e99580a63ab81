/*
 * systemd glue (libsystemd): socket activation, sd_notify and the watchdog.
 * Every notify function does nothing when not started by systemd.
 */
#ifndef SOTTOD_SYSTEMD_H
#define SOTTOD_SYSTEMD_H

#include <stddef.h>
#include <stdint.h>

/*
 * The listening sockets systemd passed (socket activation), each -1 when
 * not passed: the Unix socket (sottod.socket: a Unix stream socket with
 * any name), and TCP sockets named by FileDescriptorName=http
 * (sottod-http.socket) and FileDescriptorName=wyoming
 * (sottod-wyoming.socket).
 */
struct systemd_fds {
	int	socket;
	int	http;
	int	wyoming;
};

/*
 * Fill fds (all -1 when not socket-activated); 0, or -1 with a message
 * in err when a passed fd is not what the units provide: an unknown
 * name on a TCP socket, two of one kind, not a listening stream socket.
 */
int	systemd_listen_fds(struct systemd_fds *fds, char *err, size_t errlen);

/* READY=1, with STATUS= when status is not NULL. */
void	systemd_notify_ready(const char *status);
void	systemd_notify_status(const char *fmt, ...)
	    __attribute__((format(printf, 1, 2)));
/* RELOADING=1 (SIGHUP); READY=1 tells the manager the reload is done. */
void	systemd_notify_reloading(void);
void	systemd_notify_stopping(void);

/*
 * 1 with the watchdog interval (WatchdogSec=) in *ret when the service
 * manager expects WATCHDOG=1 pings (send them at half that interval),
 * else 0.
 */
int	systemd_watchdog_interval_usec(uint64_t *ret);
void	systemd_notify_watchdog(void);

#endif /* SOTTOD_SYSTEMD_H */
