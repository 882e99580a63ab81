/*
 * sottod --check-config, past the file itself: what would otherwise fail
 * only when sottod starts or when a client opens a stream. The model
 * resolves to a file, that file is a Whisper GGUF sotto reads, and the
 * languages of [engine] and [mic] are ones the model has. Each error names
 * where the value came from: "file:line: key: ...", "--model ...", or the
 * default.
 */
#include <stdio.h>
#include <string.h>

#include "client.h"
#include "sottod.h"

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
	return 0;
}
