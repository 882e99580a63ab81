/*
 * sottod --check-config, past the file itself: what would otherwise fail
 * only when sottod starts or when a client opens a stream. The model
 * resolves to a file, that file is a Whisper GGUF sotto reads, and the
 * languages of [engine] and [mic] are ones the model has; the network
 * listeners ([http] listen, [wyoming] listen) are ones sottod can start:
 * HTTP off loopback has a token, the two do not share a port. Each error
 * names where the value came from: "file:line: key: ...", "--model ...",
 * or the default.
 */
#include <netinet/in.h>

#include <stdio.h>
#include <string.h>

#include "model-path.h"
#include "listen-addr.h"
#include "core-private.h"
#include "daemon.h"

/* Where [section] key's value came from, for a message. */
static void
check_origin(const struct config_lines *lines, const char *path,
    const char *section, const char *key, int flag, char *buf, size_t len)
{
	int line = lines != NULL ? config_line(lines, section, key) : 0;

	if (flag)
		snprintf(buf, len, "--%s", key);
	else if (line > 0)
		snprintf(buf, len, "%s:%d: %s", path, line, key);
	else
		snprintf(buf, len, "[%s] %s (the default)", section, key);
}

/*
 * The model file at model, with language of [section]: 0, or -1 with err
 * naming the model's origin for a file that does not load, the language's
 * for a language the model does not have.
 */
static int
check_model(const struct config_lines *lines, const char *path, int model_flag,
    const char *model, const char *section, const char *language,
    char *err, size_t errlen)
{
	char where[600], msg[SOTTO_ERR_MAX];
	int rc;

	if ((rc = sotto_model_check(model, language, SOTTO_TASK_TRANSCRIBE,
	    msg)) == 0)
		return 0;
	if (rc == SOTTO_EINVAL)
		check_origin(lines, path, section, "language", 0, where,
		    sizeof(where));
	else
		check_origin(lines, path, "engine", "model", model_flag, where,
		    sizeof(where));
	snprintf(err, errlen, "%s: %s", where, msg);
	return -1;
}

int
check_engine(const struct config *cfg, const char *path,
    const struct config_lines *lines, int model_flag, char *err, size_t errlen)
{
	char where[600], file[4096], msg[1024];

	if (model_path_resolve(cfg->model, file, sizeof(file), msg,
	    sizeof(msg)) != 0) {
		check_origin(lines, path, "engine", "model", model_flag, where,
		    sizeof(where));
		snprintf(err, errlen, "%s: %s", where, msg);
		return -1;
	}
	if (check_model(lines, path, model_flag, file, "engine", cfg->language,
	    err, errlen) != 0)
		return -1;
	/* [mic] language defaults to [engine] language, checked above. */
	if (lines != NULL && config_line(lines, "mic", "language") > 0 &&
	    check_model(lines, path, model_flag, file, "mic",
	    cfg->mic_language, err, errlen) != 0)
		return -1;
	if (vad_check(cfg, msg, sizeof(msg)) != 0) {
		check_origin(lines, path, "engine", "vad_model", 0, where,
		    sizeof(where));
		snprintf(err, errlen, "%s: %s", where, msg);
		return -1;
	}
	/* Labels are optional: the model is checked when the file names it,
	   or when the microphone is to be labelled ([mic] diarize) */
	if (((lines != NULL && config_line(lines, "engine",
	    "speaker_model") > 0) || (cfg->mic_enabled && cfg->mic_diarize)) &&
	    speakers_check(cfg, msg, sizeof(msg)) != 0) {
		if (lines != NULL && config_line(lines, "engine",
		    "speaker_model") > 0)
			check_origin(lines, path, "engine", "speaker_model", 0,
			    where, sizeof(where));
		else
			check_origin(lines, path, "mic", "diarize", 0, where,
			    sizeof(where));
		snprintf(err, errlen, "%s: %s", where, msg);
		return -1;
	}
	return 0;
}

/* Where [section] listen came from: --flag, file:line, or the default. */
static void
check_listen_origin(const struct config_lines *lines, const char *path,
    const char *section, int flag, char *buf, size_t len)
{
	if (flag)
		snprintf(buf, len, "--%s", section);
	else
		check_origin(lines, path, section, "listen", 0, buf, len);
}

/* Whether a and b cannot both be bound: one port, one address or "any". */
static int
check_clash(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
	const struct sockaddr_in *a4 = (const void *)a, *b4 = (const void *)b;
	const struct sockaddr_in6 *a6 = (const void *)a, *b6 = (const void *)b;

	if (a->ss_family != b->ss_family)
		return 0;	/* IPv6 listeners are IPv6-only */
	if (a->ss_family == AF_INET)
		return a4->sin_port != 0 && a4->sin_port == b4->sin_port &&
		    (a4->sin_addr.s_addr == b4->sin_addr.s_addr ||
		    a4->sin_addr.s_addr == htonl(INADDR_ANY) ||
		    b4->sin_addr.s_addr == htonl(INADDR_ANY));
	return a6->sin6_port != 0 && a6->sin6_port == b6->sin6_port &&
	    (memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(struct in6_addr))
	    == 0 || IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr) ||
	    IN6_IS_ADDR_UNSPECIFIED(&b6->sin6_addr));
}

int
check_listeners(const struct config *cfg, const char *path,
    const struct config_lines *lines, int http_flag, int wyoming_flag,
    char *err, size_t errlen)
{
	struct sockaddr_storage h, w;
	socklen_t len;
	char where[600], msg[256];

	if (cfg->http_listen[0] != '\0') {
		check_listen_origin(lines, path, "http", http_flag, where,
		    sizeof(where));
		if (listen_addr_parse(cfg->http_listen, &h, &len, msg,
		    sizeof(msg)) != 0) {
			snprintf(err, errlen, "%s: %s", where, msg);
			return -1;
		}
		if (!listen_addr_loopback((struct sockaddr *)&h) &&
		    cfg->http_token[0] == '\0') {
			snprintf(err, errlen, "%s: %s is not a loopback address: "
			    "set [http] token, which clients then send as "
			    "Authorization: Bearer TOKEN", where,
			    cfg->http_listen);
			return -1;
		}
	}
	if (cfg->wyoming_listen[0] == '\0')
		return 0;
	check_listen_origin(lines, path, "wyoming", wyoming_flag, where,
	    sizeof(where));
	if (listen_addr_parse(cfg->wyoming_listen, &w, &len, msg,
	    sizeof(msg)) != 0) {
		snprintf(err, errlen, "%s: %s", where, msg);
		return -1;
	}
	if (cfg->http_listen[0] != '\0' && check_clash(&h, &w)) {
		snprintf(err, errlen, "%s: %s and [http] listen %s share a port: "
		    "give each its own (Wyoming is usually 10300)", where,
		    cfg->wyoming_listen, cfg->http_listen);
		return -1;
	}
	return 0;
}
