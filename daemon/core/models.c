/*
 * The models in use: the current one, which new sessions get, and the
 * ones a reload replaced, each kept until the last stream on it is freed
 * (docs/config.md, "Reloading"): a session finishes on the model it
 * started with, so its transcript never mixes two models.
 *
 * A struct model_ref counts the streams on a model, plus one while it is
 * current. References are taken on the loop thread (a new session) and
 * dropped on the compute thread (a stream freed) or the loop (a reload),
 * so the counts are under a lock of their own; the last drop frees the
 * model, on whichever thread drops it: no stream uses it then, so the
 * compute thread cannot be inside it.
 */
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model-path.h"
#include "log.h"
#include "core-private.h"

struct model_ref {
	struct sotto_model	*model;		/* owned */
	int			 refs;
};

static struct {
	pthread_mutex_t		 lock;
	struct model_ref	*current;
} models = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Make m (owned from here on) the current model; -1 when out of memory. */
int
models_set_current(struct sotto_model *m)
{
	struct model_ref *r, *old;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return -1;
	r->model = m;
	r->refs = 1;
	pthread_mutex_lock(&models.lock);
	old = models.current;
	models.current = r;
	pthread_mutex_unlock(&models.lock);
	if (old != NULL)
		models_drop(old);
	return 0;
}

/* A reference to the current model, for a new stream. */
struct model_ref *
models_take(void)
{
	struct model_ref *r;

	pthread_mutex_lock(&models.lock);
	if ((r = models.current) != NULL)
		r->refs++;
	pthread_mutex_unlock(&models.lock);
	return r;
}

const struct sotto_model *
models_model(const struct model_ref *r)
{
	return r->model;
}

int
models_is_current(const struct model_ref *r)
{
	int cur;

	pthread_mutex_lock(&models.lock);
	cur = models.current == r;
	pthread_mutex_unlock(&models.lock);
	return cur;
}

/* Drop a reference; the last one frees the model. */
void
models_drop(struct model_ref *r)
{
	struct sotto_model_info info;
	int last;

	if (r == NULL)
		return;
	pthread_mutex_lock(&models.lock);
	last = --r->refs == 0;
	pthread_mutex_unlock(&models.lock);
	if (!last)
		return;
	sotto_model_info(r->model, &info);
	log_info("model %s freed: no session uses it any more",
	    info.name != NULL ? info.name : "?");
	sotto_model_free(r->model);
	free(r);
}

/* At exit, after the compute thread has freed every stream. */
void
models_free_all(void)
{
	struct model_ref *r;

	pthread_mutex_lock(&models.lock);
	r = models.current;
	models.current = NULL;
	pthread_mutex_unlock(&models.lock);
	models_drop(r);
}

/*
 * A helper model's file (the VAD's, the speakers'): a name is looked for
 * first in the directory the Whisper model was found in, where
 * sotto-fetch-model puts it, then where Whisper models are; a path or a
 * .gguf file name is taken as it is.
 */
int
models_aux_path(const struct config *cfg, const char *name, char *buf,
    size_t len, char *err, size_t errlen)
{
	char model[PATH_MAX], e[SOTTO_ERR_MAX], *slash;
	size_t n = strlen(name);

	if (strchr(name, '/') == NULL && !(n > 5 &&
	    strcmp(name + n - 5, ".gguf") == 0) &&
	    model_path_resolve(cfg->model, model, sizeof(model), e,
	    sizeof(e)) == 0 && (slash = strrchr(model, '/')) != NULL) {
		*slash = '\0';
		if (snprintf(buf, len, "%.*s/%s.gguf", (int)(len / 2), model,
		    name) < (int)len && access(buf, R_OK) == 0)
			return 0;
	}
	return model_path_resolve(name, buf, len, err, errlen);
}
