/*
 * Network listen addresses as the config and the flags give them:
 * "127.0.0.1:8000", "0.0.0.0:8000", "[::1]:8000", "[::]:8000" or
 * "localhost:8000". Port 0 lets the kernel pick one.
 */
#ifndef SOTTOD_LISTEN_ADDR_H
#define SOTTOD_LISTEN_ADDR_H

#include <sys/socket.h>

#include <stddef.h>

#define LISTEN_ADDR_MAX		64	/* text form, with its NUL */

/*
 * Parse s into *ss and *ret_len. Returns 0, or -1 with a message in msg
 * (msglen bytes) saying what is wrong.
 */
int	listen_addr_parse(const char *s, struct sockaddr_storage *ss,
	    socklen_t *ret_len, char *msg, size_t msglen);

/* Whether sa is a loopback address (127.0.0.0/8 or ::1). */
int	listen_addr_loopback(const struct sockaddr *sa);

/* sa as "1.2.3.4:80" or "[::1]:80" in buf. */
void	listen_addr_format(const struct sockaddr *sa, char *buf, size_t len);

#endif
