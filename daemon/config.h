/*
 * sottod configuration: conf/sottod.conf, an ini file read with libinih.
 * docs/config.md documents every key.
 */
#ifndef SOTTOD_CONFIG_H
#define SOTTOD_CONFIG_H

#include <stddef.h>
#include <stdio.h>

/* The build sets SOTTOD_CONFIG_PATH to $sysconfdir/sotto/sottod.conf. */
#ifndef SOTTOD_CONFIG_PATH
#define SOTTOD_CONFIG_PATH	"/etc/sotto/sottod.conf"
#endif
#define CONFIG_PATH_DEFAULT	SOTTOD_CONFIG_PATH

struct config {
	/* [server] */
	char	socket_path[108];	/* socket = /run/sotto/sottod.sock */
	int	max_sessions;		/* max_sessions = 16 */
	size_t	max_frame_bytes;	/* max_frame_bytes = 1M */
	size_t	max_client_buffer_bytes; /* max_client_buffer_bytes = 4M */
	int	reconnect_grace_s;	/* reconnect_grace_seconds = 30 */

	/* [engine] */
	char	model[256];		/* model = tiny.en (name or path) */
	int	threads;		/* threads = 0 (all cores) */
	char	precision[8];		/* precision = auto|fp32|bf16 */
	int	step_ms;		/* step_ms = 1000 */
	int	beam_size;		/* beam_size = 1 */
	char	language[16];		/* language = en (or auto) */

	/* [mic] */
	int	mic_enabled;		/* enabled = no */
	char	mic_device[128];	/* device = default */
	int	mic_rate;		/* rate = 16000 */
	int	mic_channels;		/* channels = 1 */
	char	mic_language[16];	/* language = [engine] language */
};

/* Fill every field with its default. */
void	config_defaults(struct config *);

/*
 * Read path over the current values (call config_defaults first).  Returns
 * 0, or -1 with "path:line: message" in err for an unreadable file, a syntax
 * error, an unknown section or key, a key given twice, or a bad or
 * out-of-range value; on error the struct may be partly updated.
 */
int	config_load(struct config *, const char *path, char *err,
	    size_t errlen);

/* Print every key with its value as an ini file (sottod --check-config). */
void	config_dump(const struct config *, FILE *);

#endif /* SOTTOD_CONFIG_H */
