/*
 * systemd glue (libsystemd): socket activation, sd_notify and the watchdog.
 * Every notify function does nothing when not started by systemd.
 */
#ifndef SOTTOD_SYSTEMD_H
#define SOTTOD_SYSTEMD_H

#include <stddef.h>
#include <stdint.h>

/*
 * The socket-activated listening fd: one AF_UNIX stream socket that is
 * listening.  Returns the fd, -1 when not socket-activated, or -2 with a
 * message in err when the passed fds are not what sottod.socket provides
 * (more than one fd, or not a listening Unix stream socket).
 */
int	systemd_listen_fd(char *err, size_t errlen);

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
