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
	int	max_connections;	/* max_connections = 256 (socket) */
	size_t	max_frame_bytes;	/* max_frame_bytes = 1M */
	size_t	max_client_buffer_bytes; /* max_client_buffer_bytes = 4M */
	int	reconnect_grace_s;	/* reconnect_grace_seconds = 30 */
	int	max_connections_per_uid; /* max_connections_per_uid = 32 */
	int	handshake_timeout_s;	/* handshake_timeout_seconds = 10 */
	int	idle_timeout_s;		/* idle_timeout_seconds = 120 (0 off) */
	int	shutdown_grace_s;	/* shutdown_grace_seconds = 20 */
	int	socket_mode;		/* socket_mode = 0666 */
	char	log_level[8];		/* log_level = warning|info|debug */

	/* [engine] */
	char	model[256];		/* model = tiny.en (name or path) */
	int	threads;		/* threads = 0 (all cores) */
	int	workers;		/* workers = 0 (as many as threads,
					   at most 8) */
	char	precision[8];		/* precision = auto|fp32|bf16 */
	int	step_ms;		/* step_ms = 1000 */
	int	idle_step_ms;		/* idle_step_ms = 500, 0: off */
	int	beam_size;		/* beam_size = 1 */
	char	language[16];		/* language = en (or auto) */
	char	vad[8];			/* vad = live|all|off */
	char	vad_model[256];		/* vad_model = silero-vad */
	char	speaker_model[256];	/* speaker_model = campplus */

	/* [mic] */
	int	mic_enabled;		/* enabled = no */
	char	mic_device[128];	/* device = default */
	int	mic_rate;		/* rate = 16000 */
	int	mic_channels;		/* channels = 1 */
	char	mic_language[16];	/* language = [engine] language */
	int	mic_diarize;		/* diarize = no */

	/* [http] (daemon/net/httpd.c, daemon/http) */
	char	http_listen[64];	/* listen = ADDR:PORT; "" off */
	char	http_token[256];	/* token = ""; Bearer token */
	size_t	http_max_request_bytes;	/* max_request_bytes = 25M */
	int	http_timeout_s;		/* request_timeout_seconds = 60 */
	int	http_beam_size;		/* beam_size = 5 */
	int	http_max_connections;	/* max_connections = 256 */
	int	http_max_connections_per_address; /* = 64 */
	int	http_header_timeout_s;	/* header_timeout_seconds = 20 */
	size_t	http_min_body_rate;	/* min_body_bytes_per_second = 1K */

	/* [wyoming] */
	char	wyoming_listen[64];	/* listen = ADDR:PORT; "" off */
	size_t	wyoming_max_event_bytes; /* max_event_bytes = 1M */
	int	wyoming_max_utterance_s; /* max_utterance_seconds = 120 */
	int	wyoming_beam_size;	/* beam_size = 5 */
	char	wyoming_answer[8];	/* answer = live|whole */
	int	wyoming_max_connections; /* max_connections = 64 */
	int	wyoming_max_connections_per_address; /* = 16 */
};

/* Fill every field with its default. */
void	config_defaults(struct config *);

/*
 * Read path over the current values (call config_defaults first).  Returns
 * 0, or -1 with "path:line: message" in err for an unreadable file, a syntax
 * error, a NUL byte, an unknown section or key, a key given twice, or a bad
 * or out-of-range value, or "path: message" for a file that is not a
 * regular file or is over 1 MiB (never read: a FIFO or /dev/zero would
 * block the caller); on error the struct may be partly updated.
 */
int	config_load(struct config *, const char *path, char *err,
	    size_t errlen);

/* The line of each key in a file, for messages about its values. */
struct config_lines {
	int	line[64];		/* config.c's key order; 0: not given */
};

/* config_load(), also telling where each key given was (lines). */
int	config_load_lines(struct config *, const char *path,
	    struct config_lines *lines, char *err, size_t errlen);
/* Line of [section] key in the file, 0 when the file does not give it. */
int	config_line(const struct config_lines *, const char *section,
	    const char *key);

/* Print every key with its value as an ini file (sottod --check-config). */
void	config_dump(const struct config *, FILE *);

/*
 * SIGHUP.  For each key whose value differs between old and new, call fn
 * with the section, the key, both values as text, and whether sottod
 * applies the key while running (live) or only at its next start.
 * Returns the number of keys that differ.
 */
typedef void config_diff_fn(const char *section, const char *key,
    const char *old_value, const char *new_value, int live, void *arg);
int	config_diff(const struct config *old, const struct config *new,
	    config_diff_fn *fn, void *arg);
/* Copy every key that needs a restart from old into cfg. */
void	config_keep_restart_keys(struct config *cfg, const struct config *old);

#endif /* SOTTOD_CONFIG_H */
