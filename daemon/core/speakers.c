/*
 * Speaker labels for the doors ([engine] speaker_model): the CAM++ model
 * and the Silero VAD that sotto_diarize() and live labels need
 * (docs/speakers.md).
 *
 * Loaded by the first request that asks for labels, not at start: most
 * daemons never label, and CAM++ holds 27 MB. A failed load is tried again
 * by the next request, so fetching the model needs no restart. The load
 * runs on the loop thread; the compute thread only reads the models, in
 * jobs queued after the load (the queue's lock orders the two), and they
 * are freed at exit, after the compute thread has stopped.
 *
 * The VAD is the sessions' one when [engine] vad loaded it; with vad = off
 * labels load their own, which no session uses.
 */
#include <limits.h>
#include <stdio.h>

#include "model-path.h"
#include "log.h"
#include "core-private.h"

static struct {
	struct sotto_speaker	*spk;
	struct sotto_vad	*vad;		/* owned; NULL: core_vad()'s */
} speakers;

/* cfg's speaker model into *ret: 0, or -1 with what to do in err. */
static int
speakers_open(const struct config *cfg, struct sotto_speaker **ret,
    char *path, size_t len, char *err, size_t errlen)
{
	char e[SOTTO_ERR_MAX];

	if (models_aux_path(cfg, cfg->speaker_model, path, len, e,
	    sizeof(e)) != 0 || sotto_speaker_load(path, ret, e) != 0) {
		snprintf(err, errlen, "speaker labels need the speaker model "
		    "%s, which does not load: %s; run '%s campplus'",
		    cfg->speaker_model, e, model_fetch_command());
		return -1;
	}
	return 0;
}

/* The VAD for labels: the sessions' one, else one of our own. */
static int
speakers_vad(const struct sotto_vad **ret, char *err, size_t errlen)
{
	char path[PATH_MAX], e[SOTTO_ERR_MAX];
	const struct config *cfg = &core.cfg;

	if ((*ret = core_vad()) != NULL ||
	    (*ret = speakers.vad) != NULL)
		return 0;
	if (models_aux_path(cfg, cfg->vad_model, path, sizeof(path), e,
	    sizeof(e)) != 0 || sotto_vad_load(path, &speakers.vad, e) != 0) {
		snprintf(err, errlen, "speaker labels need the VAD model %s, "
		    "which does not load: %s; run '%s silero-vad'",
		    cfg->vad_model, e, model_fetch_command());
		return -1;
	}
	log_info("VAD %s loaded from %s for speaker labels", cfg->vad_model,
	    path);
	*ret = speakers.vad;
	return 0;
}

int
core_speakers(const struct sotto_speaker **spk, const struct sotto_vad **vad,
    char *err, size_t errlen)
{
	char path[PATH_MAX];

	if (speakers.spk == NULL) {
		if (speakers_open(&core.cfg, &speakers.spk, path,
		    sizeof(path), err, errlen) != 0) {
			log_warnx("%s", err);
			return -1;
		}
		log_info("speaker model %s loaded from %s",
		    core.cfg.speaker_model, path);
	}
	if (speakers_vad(vad, err, errlen) != 0) {
		log_warnx("%s", err);
		return -1;
	}
	*spk = speakers.spk;
	return 0;
}

int
speakers_check(const struct config *cfg, char *err, size_t errlen)
{
	struct sotto_speaker *s = NULL;
	char path[PATH_MAX];

	if (speakers_open(cfg, &s, path, sizeof(path), err, errlen) != 0)
		return -1;
	sotto_speaker_free(s);
	return 0;
}

void
speakers_free(void)
{
	sotto_speaker_free(speakers.spk);
	sotto_vad_free(speakers.vad);
	speakers.spk = NULL;
	speakers.vad = NULL;
}
