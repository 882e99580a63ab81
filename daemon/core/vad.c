/*
 * Voice activity detection for sessions ([engine] vad and vad_model).
 *
 * vad = live (the default) gives the microphone and live client streams
 * (protocol `live`) a Silero VAD, all gives it to every session, off to
 * none. With it, a window in which the VAD hears no speech is neither
 * encoded nor decoded (lib/stream/stream-vad.c): noise, music or a tone on a
 * live stream cost the VAD alone and give no partials.
 *
 * The model is read at start when vad is not off, or at the first reload
 * that turns it on. A name (silero-vad) is looked for first in the
 * directory the Whisper model was found in, then where Whisper models are
 * (common/model-path.c); a path is taken as it is. It is shared by every
 * stream (read-only) and freed at exit, after the streams.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "model-path.h"
#include "log.h"
#include "core-private.h"

static struct sotto_vad *vad_model;

/* cfg's VAD model into *ret: 0, or -1 with what to do in err. */
static int
vad_open(const struct config *cfg, struct sotto_vad **ret, char *path,
    size_t len, char *err, size_t errlen)
{
	char e[SOTTO_ERR_MAX];

	if (models_aux_path(cfg, cfg->vad_model, path, len, e,
	    sizeof(e)) != 0 ||
	    sotto_vad_load(path, ret, e) != 0) {
		snprintf(err, errlen, "cannot load the VAD model %s: %s; "
		    "run '%s silero-vad' or set [engine] vad = off",
		    cfg->vad_model, e, model_fetch_command());
		return -1;
	}
	return 0;
}

static int
vad_load(char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (vad_open(&core.cfg, &vad_model, path, sizeof(path), err,
	    errlen) != 0)
		return -1;
	log_info("VAD %s loaded from %s (sessions: %s)", core.cfg.vad_model,
	    path, core.cfg.vad);
	return 0;
}

int
vad_check(const struct config *cfg, char *err, size_t errlen)
{
	struct sotto_vad *v = NULL;
	char path[PATH_MAX];

	if (strcmp(cfg->vad, "off") == 0)
		return 0;
	if (vad_open(cfg, &v, path, sizeof(path), err, errlen) != 0)
		return -1;
	sotto_vad_free(v);
	return 0;
}

int
vad_start(char *err, size_t errlen)
{
	if (strcmp(core.cfg.vad, "off") == 0)
		return 0;
	return vad_load(err, errlen);
}

void
vad_reload(void)
{
	char err[1024];

	if (vad_model != NULL || strcmp(core.cfg.vad, "off") == 0)
		return;
	if (vad_load(err, sizeof(err)) != 0) {
		log_warnx("reload: %s; vad stays off", err);
		snprintf(core.cfg.vad, sizeof(core.cfg.vad), "off");
	}
}

const struct sotto_vad *
vad_for(int live)
{
	if (strcmp(core.cfg.vad, "all") == 0 ||
	    (live && strcmp(core.cfg.vad, "live") == 0))
		return vad_model;
	return NULL;
}

const struct sotto_vad *
core_vad(void)
{
	return vad_model;
}

void
vad_free(void)
{
	sotto_vad_free(vad_model);
	vad_model = NULL;
}
