/*
 * The Unix socket door: local clients (`sotto stream`, `listen`,
 * `status`, programs with audio of their own) speaking the sottod
 * protocol (docs/protocol.md) in frames. unix.c is the socket (ours or
 * systemd's) and who may connect; unix-peer.c a connection's frames.
 */
#ifndef SOTTOD_UNIX_H
#define SOTTOD_UNIX_H

#include <stddef.h>

struct peer_ops;

/*
 * Serve on fd, a listening socket from systemd, or (fd -1) on a socket
 * of our own at [server] socket, made with socket_mode (a stale one is
 * removed first). Registers the door. 0, or -1 with err.
 */
int	unix_start(int fd, char *err, size_t errlen);

/* unix-peer.c */
extern const struct peer_ops unix_ops;

#endif
