/*
 * Configuration file.  libinih splits the file into (section, key, value);
 * config_handler looks the pair up in config_keys, a table sorted by section
 * and key, whose parser (config-value.c) checks the value and stores it at
 * the field's offset.
 * The line reader (config-file.c: a regular file of at most 1 MiB) counts
 * lines, so every message is "path:line: message", and strips leading
 * blanks so that inih never treats an indented line as the continuation of
 * the previous value.  The first error wins; parsing goes on only to let
 * inih finish the file.
 *
 * Each key is marked live when the running daemon can apply a new value
 * (SIGHUP: config_diff, config_keep_restart_keys; a new model is loaded
 * by daemon/core/reload.c); the others (the socket, the threads, the
 * precision, the microphone) take effect at the next start.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "config.h"
#include "config-file.h"
#include "config-key.h"

/* Per-load state, passed to inih as its user pointer. */
struct config_ctx {
	struct config	*cfg;
	const char	*path;
	struct config_file file;
	int		 line;
	int		 err_line;
	char		 err[CONFIG_MSG_MAX];
	int		 seen[64];	/* line of each key in config_keys */
};

#define LIVE	1
#define RESTART	0
#define S(sec, k, fn, field, live) \
	{ sec, k, fn, CONFIG_STRING, offsetof(struct config, field), \
	    sizeof(((struct config *)0)->field), 0, 0, live }
#define I(sec, k, field, lo, hi, live) \
	{ sec, k, config_parse_int, CONFIG_INT, \
	    offsetof(struct config, field), sizeof(int), lo, hi, live }
#define Z(sec, k, field, lo, hi, live) \
	{ sec, k, config_parse_size, CONFIG_SIZE, \
	    offsetof(struct config, field), sizeof(size_t), lo, hi, live }
#define B(sec, k, field, live) \
	{ sec, k, config_parse_bool, CONFIG_BOOL, \
	    offsetof(struct config, field), sizeof(int), 0, 1, live }
#define M(sec, k, field, live) \
	{ sec, k, config_parse_mode, CONFIG_MODE, \
	    offsetof(struct config, field), sizeof(int), 0, 0777, live }

/*
 * Sorted by section, then key: config_find uses bsearch.  LIVE keys are
 * applied by a SIGHUP (engine keys to sessions opened after it).
 */
static const struct config_key config_keys[] = {
	I("engine", "beam_size", beam_size, 1, 16, LIVE),
	I("engine", "idle_step_ms", idle_step_ms, 0, 30000, LIVE),
	S("engine", "language", config_parse_language, language, LIVE),
	S("engine", "model", config_parse_string, model, LIVE),
	S("engine", "precision", config_parse_precision, precision, RESTART),
	S("engine", "speaker_model", config_parse_string, speaker_model,
	    RESTART),
	I("engine", "step_ms", step_ms, 100, 30000, LIVE),
	I("engine", "threads", threads, 0, 1024, RESTART),
	S("engine", "vad", config_parse_vad, vad, LIVE),
	S("engine", "vad_model", config_parse_string, vad_model, RESTART),
	I("engine", "workers", workers, 0, 8, RESTART),
	I("http", "beam_size", http_beam_size, 1, 16, LIVE),
	I("http", "header_timeout_seconds", http_header_timeout_s, 1, 3600,
	    LIVE),
	S("http", "listen", config_parse_listen, http_listen, RESTART),
	I("http", "max_connections", http_max_connections, 1, 65536, LIVE),
	I("http", "max_connections_per_address",
	    http_max_connections_per_address, 1, 65536, LIVE),
	Z("http", "max_request_bytes", http_max_request_bytes,
	    64 * 1024, 1024LL * 1024 * 1024, RESTART),
	Z("http", "min_body_bytes_per_second", http_min_body_rate, 0,
	    1024LL * 1024 * 1024, LIVE),
	I("http", "request_timeout_seconds", http_timeout_s, 1, 3600,
	    RESTART),
	S("http", "token", config_parse_token, http_token, RESTART),
	I("mic", "channels", mic_channels, 1, 32, RESTART),
	S("mic", "device", config_parse_string, mic_device, RESTART),
	B("mic", "diarize", mic_diarize, RESTART),
	B("mic", "enabled", mic_enabled, RESTART),
	S("mic", "language", config_parse_language, mic_language, RESTART),
	I("mic", "rate", mic_rate, 8000, 192000, RESTART),
	I("server", "handshake_timeout_seconds", handshake_timeout_s, 1, 3600,
	    LIVE),
	I("server", "idle_timeout_seconds", idle_timeout_s, 0, 86400, LIVE),
	S("server", "log_level", config_parse_log_level, log_level, LIVE),
	Z("server", "max_client_buffer_bytes", max_client_buffer_bytes,
	    4 * 1024, 1024LL * 1024 * 1024, LIVE),
	I("server", "max_connections", max_connections, 1, 65536, LIVE),
	I("server", "max_connections_per_uid", max_connections_per_uid,
	    1, 4096, LIVE),
	Z("server", "max_frame_bytes", max_frame_bytes,
	    4096, 64LL * 1024 * 1024, LIVE),
	I("server", "max_sessions", max_sessions, 1, 1024, LIVE),
	I("server", "reconnect_grace_seconds", reconnect_grace_s, 0, 3600,
	    LIVE),
	I("server", "shutdown_grace_seconds", shutdown_grace_s, 0, 3600, LIVE),
	S("server", "socket", config_parse_string, socket_path, RESTART),
	M("server", "socket_mode", socket_mode, LIVE),
	S("wyoming", "answer", config_parse_answer, wyoming_answer, LIVE),
	I("wyoming", "beam_size", wyoming_beam_size, 1, 16, LIVE),
	S("wyoming", "listen", config_parse_listen, wyoming_listen, RESTART),
	I("wyoming", "max_connections", wyoming_max_connections, 1, 65536,
	    LIVE),
	I("wyoming", "max_connections_per_address",
	    wyoming_max_connections_per_address, 1, 65536, LIVE),
	Z("wyoming", "max_event_bytes", wyoming_max_event_bytes,
	    4096, 64LL * 1024 * 1024, LIVE),
	I("wyoming", "max_utterance_seconds", wyoming_max_utterance_s, 1,
	    3600, LIVE),
};
#define CONFIG_NKEYS	(sizeof(config_keys) / sizeof(config_keys[0]))
_Static_assert(CONFIG_NKEYS <= 64, "struct config_ctx seen[] too small");
_Static_assert(CONFIG_NKEYS <= sizeof(((struct config_lines *)0)->line) /
    sizeof(int), "struct config_lines line[] too small");

/* Sections in the order config_dump prints them. */
static const char *const config_sections[] = { "server", "engine", "mic",
    "http", "wyoming" };

void
config_defaults(struct config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	CONFIG_SET(cfg->socket_path, "/run/sotto/sottod.sock");
	cfg->max_sessions = 16;
	cfg->max_frame_bytes = CONFIG_MIB;
	cfg->max_client_buffer_bytes = 4 * CONFIG_MIB;
	cfg->reconnect_grace_s = 30;
	cfg->max_connections = 256;
	cfg->max_connections_per_uid = 32;
	cfg->handshake_timeout_s = 10;
	cfg->idle_timeout_s = 120;
	cfg->shutdown_grace_s = 20;
	cfg->socket_mode = 0666;
	CONFIG_SET(cfg->log_level, "info");
	CONFIG_SET(cfg->model, "tiny.en");
	cfg->threads = 0;
	cfg->workers = 0;
	CONFIG_SET(cfg->precision, "auto");
	cfg->step_ms = 1000;
	cfg->idle_step_ms = 500;
	cfg->beam_size = 1;
	CONFIG_SET(cfg->language, "auto");
	CONFIG_SET(cfg->vad, "live");
	CONFIG_SET(cfg->vad_model, "silero-vad");
	CONFIG_SET(cfg->speaker_model, "campplus");
	cfg->mic_enabled = 0;
	cfg->mic_diarize = 0;
	CONFIG_SET(cfg->mic_device, "default");
	cfg->mic_rate = 16000;
	cfg->mic_channels = 1;
	CONFIG_SET(cfg->mic_language, cfg->language);
	cfg->http_beam_size = 5;
	cfg->http_max_request_bytes = 25 * CONFIG_MIB;
	cfg->http_timeout_s = 60;
	cfg->http_max_connections = 256;
	cfg->http_max_connections_per_address = 64;
	cfg->http_header_timeout_s = 20;
	cfg->http_min_body_rate = CONFIG_KIB;
	cfg->wyoming_max_event_bytes = CONFIG_MIB;
	cfg->wyoming_max_utterance_s = 120;
	cfg->wyoming_beam_size = 5;
	CONFIG_SET(cfg->wyoming_answer, "live");
	cfg->wyoming_max_connections = 64;
	cfg->wyoming_max_connections_per_address = 16;
}

static int
config_key_cmp(const void *a, const void *b)
{
	const struct config_key *x = a, *y = b;
	int r;

	if ((r = strcmp(x->section, y->section)) != 0)
		return r;
	return strcmp(x->key, y->key);
}

static const struct config_key *
config_find(const char *section, const char *key)
{
	struct config_key want = { .section = section, .key = key };

	return bsearch(&want, config_keys, CONFIG_NKEYS, sizeof(want),
	    config_key_cmp);
}

int
config_line(const struct config_lines *lines, const char *section,
    const char *key)
{
	const struct config_key *k = config_find(section, key);

	return k == NULL ? 0 : lines->line[k - config_keys];
}

static int
config_section_known(const char *section)
{
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		if (strcmp(config_keys[i].section, section) == 0)
			return 1;
	}
	return 0;
}

/*
 * The sections, as "[a], [b] or [c]": those that have key, or every
 * section when key is NULL or no section has it. Returns how many.
 */
static int
config_sections_of(const char *key, char *buf, size_t len)
{
	const char *has[sizeof(config_sections) / sizeof(config_sections[0])];
	size_t i, k, n = 0, at = 0;

	for (i = 0; i < sizeof(has) / sizeof(has[0]); i++)
		for (k = 0; key != NULL && k < CONFIG_NKEYS; k++)
			if (strcmp(config_keys[k].section,
			    config_sections[i]) == 0 &&
			    strcmp(config_keys[k].key, key) == 0) {
				has[n++] = config_sections[i];
				break;
			}
	if (n == 0)
		for (; n < sizeof(has) / sizeof(has[0]); n++)
			has[n] = config_sections[n];
	buf[0] = '\0';
	for (i = 0; i < n && at < len; i++)
		at += (size_t)snprintf(buf + at, len - at, "%s[%s]", i == 0 ?
		    "" : i + 1 == n ? " or " : ", ", has[i]);
	return key != NULL && n < sizeof(has) / sizeof(has[0]) ? (int)n : 0;
}

/* Keep the first error, with the line it was found on. */
static int
config_error(struct config_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static int
config_error(struct config_ctx *ctx, const char *fmt, ...)
{
	va_list ap;

	if (ctx->err_line != 0 && ctx->err_line <= ctx->line)
		return 0;
	ctx->err_line = ctx->line;
	va_start(ap, fmt);
	vsnprintf(ctx->err, sizeof(ctx->err), fmt, ap);
	va_end(ap);
	return 0;
}

/* inih callback: returns nonzero when the pair was accepted. */
static int
config_handler(void *user, const char *section, const char *key,
    const char *value)
{
	struct config_ctx *ctx = user;
	const struct config_key *k;
	char msg[CONFIG_MSG_MAX];
	size_t i;

	if (*section == '\0') {
		if (config_sections_of(key, msg, sizeof(msg)) > 0)
			return config_error(ctx, "\"%s\" is outside a "
			    "section: put it under %s", key, msg);
		return config_error(ctx, "\"%s\" is outside a section (the "
		    "sections: %s)", key, msg);
	}
	if ((k = config_find(section, key)) == NULL) {
		if (!config_section_known(section)) {
			config_sections_of(NULL, msg, sizeof(msg));
			return config_error(ctx, "unknown section [%s] (the "
			    "sections: %s)", section, msg);
		}
		return config_error(ctx, "unknown key \"%s\" in [%s]", key,
		    section);
	}
	i = (size_t)(k - config_keys);
	if (ctx->seen[i] != 0)
		return config_error(ctx, "%s: given twice in [%s] (first on "
		    "line %d)", key, section, ctx->seen[i]);
	ctx->seen[i] = ctx->line;
	/*
	 * inih keeps ";x" in "key =;x" (no blank before the ';') but reads
	 * "key = ;x" as a comment, so such a value would not survive
	 * --check-config's "key = value" (found by tests/fuzz/fuzz-config).
	 */
	if (*value == ';')
		return config_error(ctx, "%s: a value cannot start with ';' "
		    "(\" ;\" starts a comment)", key);
	if (k->parse(k, (char *)ctx->cfg + k->offset, value, msg,
	    sizeof(msg)) == -1)
		return config_error(ctx, "%s", msg);
	return 1;
}

/* inih reader: the next line, with what the line reader found wrong. */
static char *
config_reader(char *buf, int size, void *user)
{
	struct config_ctx *ctx = user;

	if (config_file_line(&ctx->file, buf, size) == NULL)
		return NULL;
	ctx->line = ctx->file.line;
	if (ctx->file.problem[0] != '\0')
		config_error(ctx, "%s", ctx->file.problem);
	return buf;
}

int
config_load(struct config *cfg, const char *path, char *err, size_t errlen)
{
	return config_load_lines(cfg, path, NULL, err, errlen);
}

int
config_load_lines(struct config *cfg, const char *path,
    struct config_lines *lines, char *err, size_t errlen)
{
	struct config_ctx ctx;
	int line, mic_language_set;

	memset(&ctx, 0, sizeof(ctx));
	ctx.cfg = cfg;
	ctx.path = path;
	if (config_file_open(&ctx.file, path, err, errlen) != 0)
		return -1;
	line = ini_parse_stream(config_reader, &ctx, config_handler, &ctx);
	if (config_file_close(&ctx.file, ctx.err_line == 0, err, errlen) != 0)
		return -1;
	if (line > 0 && (ctx.err_line == 0 || line < ctx.err_line)) {
		ctx.err_line = line;
		snprintf(ctx.err, sizeof(ctx.err), "syntax error (expected "
		    "[section], key = value or a # comment)");
	}
	if (ctx.err_line != 0 || line < 0) {
		snprintf(err, errlen, "%s:%d: %s", path, ctx.err_line,
		    line < 0 ? "out of memory" : ctx.err);
		return -1;
	}
	if (lines != NULL)
		memcpy(lines->line, ctx.seen, sizeof(lines->line));
	mic_language_set = ctx.seen[config_find("mic", "language") -
	    config_keys] != 0;
	if (!mic_language_set)
		CONFIG_SET(cfg->mic_language, cfg->language);
	return 0;
}

static void
config_format_size(char *buf, size_t len, size_t v)
{
	if (v != 0 && v % CONFIG_GIB == 0)
		snprintf(buf, len, "%zuG", v / CONFIG_GIB);
	else if (v != 0 && v % CONFIG_MIB == 0)
		snprintf(buf, len, "%zuM", v / CONFIG_MIB);
	else if (v != 0 && v % CONFIG_KIB == 0)
		snprintf(buf, len, "%zuK", v / CONFIG_KIB);
	else
		snprintf(buf, len, "%zu", v);
}

/* The value of key k in cfg as the file would give it. */
static void
config_format(const struct config *cfg, const struct config_key *k,
    char *buf, size_t len)
{
	const void *field = (const char *)cfg + k->offset;

	switch (k->type) {
	case CONFIG_STRING:
		snprintf(buf, len, "%s", (const char *)field);
		break;
	case CONFIG_INT:
		snprintf(buf, len, "%d", *(const int *)field);
		break;
	case CONFIG_SIZE:
		config_format_size(buf, len, *(const size_t *)field);
		break;
	case CONFIG_BOOL:
		snprintf(buf, len, "%s", *(const int *)field ? "yes" : "no");
		break;
	case CONFIG_MODE:
		snprintf(buf, len, "%04o", *(const int *)field);
		break;
	}
}

void
config_dump(const struct config *cfg, FILE *fp)
{
	char value[CONFIG_MSG_MAX];
	size_t s, i;

	for (s = 0; s < sizeof(config_sections) / sizeof(config_sections[0]);
	    s++) {
		fprintf(fp, "%s[%s]\n", s > 0 ? "\n" : "", config_sections[s]);
		for (i = 0; i < CONFIG_NKEYS; i++) {
			if (strcmp(config_keys[i].section,
			    config_sections[s]) != 0)
				continue;
			config_format(cfg, &config_keys[i], value,
			    sizeof(value));
			fprintf(fp, "%s = %s\n", config_keys[i].key, value);
		}
	}
}

static int
config_key_differs(const struct config *a, const struct config *b,
    const struct config_key *k)
{
	const char *x = (const char *)a + k->offset;
	const char *y = (const char *)b + k->offset;

	if (k->type == CONFIG_STRING)
		return strcmp(x, y) != 0;
	return memcmp(x, y, k->size) != 0;
}

int
config_diff(const struct config *old, const struct config *new,
    config_diff_fn *fn, void *arg)
{
	char a[CONFIG_MSG_MAX], b[CONFIG_MSG_MAX];
	size_t i;
	int n = 0;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		if (!config_key_differs(old, new, &config_keys[i]))
			continue;
		config_format(old, &config_keys[i], a, sizeof(a));
		config_format(new, &config_keys[i], b, sizeof(b));
		fn(config_keys[i].section, config_keys[i].key, a, b,
		    config_keys[i].live, arg);
		n++;
	}
	return n;
}

void
config_keep_restart_keys(struct config *cfg, const struct config *old)
{
	const struct config_key *k;
	size_t i;

	for (i = 0; i < CONFIG_NKEYS; i++) {
		k = &config_keys[i];
		if (!k->live)
			memcpy((char *)cfg + k->offset,
			    (const char *)old + k->offset, k->size);
	}
}
