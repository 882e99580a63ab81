/*
 * Listen addresses: a numeric IPv4 address or a bracketed IPv6 address
 * (or "localhost", which is 127.0.0.1), a colon and a port. Names are
 * never looked up: a daemon's listen address should not depend on DNS.
 */
#include <netinet/in.h>
#include <arpa/inet.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "listen-addr.h"

/* A decimal port, 0 to 65535. Returns it, or -1. */
static long
listen_addr_port(const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len > 5 || strspn(s, "0123456789") != len)
		return -1;
	return strtol(s, NULL, 10) <= 65535 ? strtol(s, NULL, 10) : -1;
}

int
listen_addr_parse(const char *s, struct sockaddr_storage *ss,
    socklen_t *ret_len, char *msg, size_t msglen)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	char host[LISTEN_ADDR_MAX];
	const char *colon, *h = host;
	size_t hlen;
	long port;

	memset(ss, 0, sizeof(*ss));
	if ((colon = strrchr(s, ':')) == NULL ||
	    (port = listen_addr_port(colon + 1)) < 0) {
		snprintf(msg, msglen, "\"%s\" is not ADDRESS:PORT (such as "
		    "127.0.0.1:8000 or [::1]:8000; port 0 to 65535)", s);
		return -1;
	}
	hlen = (size_t)(colon - s);
	if (hlen >= sizeof(host))
		goto bad;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (hlen >= 2 && host[0] == '[' && host[hlen - 1] == ']') {
		host[hlen - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &sin6->sin6_addr) != 1)
			goto bad;
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons((uint16_t)port);
		*ret_len = sizeof(*sin6);
		return 0;
	}
	if (strcmp(host, "localhost") == 0)
		h = "127.0.0.1";
	if (inet_pton(AF_INET, h, &sin->sin_addr) != 1)
		goto bad;
	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	*ret_len = sizeof(*sin);
	return 0;
bad:
	snprintf(msg, msglen, "\"%s\": the address is not a numeric IPv4 "
	    "address, [IPv6] address or localhost", s);
	return -1;
}

int
listen_addr_loopback(const struct sockaddr *sa)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
	const uint8_t *a;

	if (sa->sa_family == AF_INET)
		return (ntohl(sin->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family != AF_INET6)
		return 0;
	if (IN6_IS_ADDR_LOOPBACK(&sin6->sin6_addr))
		return 1;
	a = sin6->sin6_addr.s6_addr;	/* ::ffff:127.x.y.z */
	return IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr) && a[12] == 127;
}

void
listen_addr_format(const struct sockaddr *sa, char *buf, size_t len)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)sa;
	char a[INET6_ADDRSTRLEN];

	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &sin->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(sin->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		inet_ntop(AF_INET6, &sin6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(sin6->sin6_port));
	} else
		snprintf(buf, len, "(family %d)", sa->sa_family);
}
