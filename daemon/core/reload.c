/*
 * SIGHUP: the configuration read again (by the program's hook: the file,
 * then the flags) and applied where it can be; then the model, at start
 * and on a reload (docs/config.md, "Reloading").
 *
 * A file with an error is refused and the configuration in effect kept;
 * otherwise the keys that can change live are applied (the doors are
 * told, struct door's reload) and each key that needs a restart is
 * logged and left as it was.
 *
 * The engine reads the model file into memory of its own
 * (lib/model/gguf-load.c), so a running sottod never depends on the file
 * again: replacing or truncating it changes nothing until a reload. SIGHUP
 * loads the model again when `[engine] model` names another one, or when
 * the file it names is no longer the file loaded (another inode, size,
 * modification or change time): a package upgrade, `scripts/fetch-model`
 * (which renames a new file into place) or a `cp` over it, followed by
 * `systemctl reload sottod`.
 *
 * The new model is loaded on a thread of its own, so the loop keeps
 * serving and the compute thread keeps decoding meanwhile (they share
 * the cores with the load for that time). The file's identity is taken
 * before and after the load; a file that changed meanwhile (still being
 * written) is refused. Then, on the loop, the new model becomes current
 * (models.c): sessions opened from then on use it, sessions already open
 * finish on the old one, which is freed with the last of them; the
 * microphone moves to the new one at its next step. A model that fails
 * to load changes nothing: the log says why and sottod goes on with the
 * model it has. threads and precision stay as they were at start.
 */
#include <sys/stat.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core-private.h"
#include "daemon.h"
#include "log.h"
#include "model-path.h"
#include "session.h"
#include "systemd.h"

/* The file a model came from, to tell whether it was replaced. */
struct model_file {
	char		 key[sizeof(((struct config *)0)->model)];
	char		 path[PATH_MAX];
	dev_t		 dev;
	ino_t		 ino;
	off_t		 size;
	struct timespec	 mtim, ctim;
};

/* A load: what to load (set on the loop), its result (on the thread). */
struct model_load {
	struct model_file	 file;
	int			 threads;
	char			 precision[8];
	struct sotto_model	*model;
	double			 secs;
	char			 err[SOTTO_ERR_MAX + PATH_MAX];
};

static struct {
	struct model_file	 loaded;	/* the current model's file */
	struct model_load	 load;		/* the one in progress */
	pthread_t		 thread;
	int			 busy, again;
	struct event		*done;
} reload;

static void
model_file_stat(struct model_file *f, const struct stat *st)
{
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->size = st->st_size;
	f->mtim = st->st_mtim;
	f->ctim = st->st_ctim;
}

static int
model_file_same(const struct model_file *a, const struct model_file *b)
{
	return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	    a->mtim.tv_sec == b->mtim.tv_sec &&
	    a->mtim.tv_nsec == b->mtim.tv_nsec &&
	    a->ctim.tv_sec == b->ctim.tv_sec &&
	    a->ctim.tv_nsec == b->ctim.tv_nsec;
}

/* Resolve key into f (path and identity); 0, or -1 with err. */
static int
model_file_find(const char *key, struct model_file *f, char *err,
    size_t errlen)
{
	struct stat st;

	snprintf(f->key, sizeof(f->key), "%s", key);
	if (model_path_resolve(key, f->path, sizeof(f->path), err,
	    errlen) != 0)
		return -1;
	if (stat(f->path, &st) != 0) {
		snprintf(err, errlen, "%s: %s", f->path, strerror(errno));
		return -1;
	}
	model_file_stat(f, &st);
	return 0;
}

/* Load l->file with l's settings; sets l->model or l->err. */
static void
model_load_run(struct model_load *l)
{
	struct sotto_model_params mp;
	struct model_file after;
	char err[SOTTO_ERR_MAX];
	double t0 = core_now();

	sotto_model_params_init(&mp);
	mp.threads = l->threads;
	if (strcmp(l->precision, "fp32") == 0)
		mp.precision = SOTTO_PRECISION_FP32;
	else if (strcmp(l->precision, "bf16") == 0)
		mp.precision = SOTTO_PRECISION_BF16;
	else if (strcmp(l->precision, "int8") == 0)
		mp.precision = SOTTO_PRECISION_INT8;
	l->model = NULL;
	if (sotto_model_load(l->file.path, &mp, &l->model, err) != 0) {
		snprintf(l->err, sizeof(l->err), "%s", err);
		return;
	}
	l->secs = core_now() - t0;
	if (model_file_find(l->file.key, &after, l->err,
	    sizeof(l->err)) == 0 && model_file_same(&after, &l->file))
		return;
	if (l->err[0] == '\0')
		snprintf(l->err, sizeof(l->err), "%s changed while it was "
		    "read (still being written?); reload again once it is "
		    "complete", l->file.path);
	sotto_model_free(l->model);
	l->model = NULL;
}

/* Make l's model current (loop thread). */
static int
model_install(struct model_load *l)
{
	struct sotto_model_info info;

	if (models_set_current(l->model) != 0) {
		sotto_model_free(l->model);
		l->model = NULL;
		return -1;
	}
	core.model = l->model;
	l->model = NULL;
	reload.loaded = l->file;
	sotto_model_info(core.model, &info);
	snprintf(core.model_name, sizeof(core.model_name), "%.*s",
	    (int)sizeof(core.model_name) - 1, info.name ? info.name :
	    l->file.key);
	core.multilingual = info.multilingual;
	snprintf(core.model_compute, sizeof(core.model_compute), "%s",
	    info.compute);
	log_info("model %s loaded from %s in %.1f s (%s, %d threads)",
	    core.model_name, l->file.path, l->secs, info.compute,
	    info.threads);
	return 0;
}

static void
model_load_setup(struct model_load *l)
{
	l->threads = core.cfg.threads;
	snprintf(l->precision, sizeof(l->precision), "%s",
	    core.cfg.precision);
	l->err[0] = '\0';
}

/* At start: the model of core.cfg, or exit. */
void
reload_load_model(void)
{
	struct model_load *l = &reload.load;

	model_load_setup(l);
	if (model_file_find(core.cfg.model, &l->file, l->err,
	    sizeof(l->err)) != 0)
		fatalx("%s", l->err);
	model_load_run(l);
	if (l->model == NULL)
		fatalx("%s", l->err);
	if (model_install(l) != 0)
		fatalx("out of memory");
}

static void *
reload_main(void *arg)
{
	model_load_run(&reload.load);
	event_active(reload.done, EV_READ, 0);
	return NULL;
}

static void
reload_done_cb(int fd, short ev, void *arg)
{
	struct model_load *l = &reload.load;
	const char *old = core.model_name;
	char was[PROTO_NAME_MAX];

	pthread_join(reload.thread, NULL);
	reload.busy = 0;
	snprintf(was, sizeof(was), "%s", old);
	if (l->model == NULL || model_install(l) != 0) {
		log_warnx("reload: cannot load model %s: %s; still %s",
		    l->file.key, l->err[0] ? l->err : "out of memory", was);
		snprintf(core.cfg.model, sizeof(core.cfg.model), "%s",
		    reload.loaded.key);
	} else
		log_info("reload: new sessions use model %s; %d open "
		    "session(s) finish on %s", core.model_name,
		    session_busy(), was);
	if (reload.again) {
		reload.again = 0;
		if (reload_model())
			return;
	}
	systemd_notify_ready(NULL);
}

int
reload_init(char *err, size_t errlen)
{
	reload.done = event_new(core.base, -1, 0, reload_done_cb, NULL);
	if (reload.done == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

/*
 * After a reload has applied core.cfg (loop thread): start loading the
 * model when the key or the file changed. Returns 1 when a load is under
 * way (it sends systemd READY=1 when done), else 0.
 */
int
reload_model(void)
{
	struct model_load *l = &reload.load;
	int rc;

	if (reload.busy) {
		reload.again = 1;
		log_info("reload: a model is still loading; the model is "
		    "checked again once it is done");
		return 1;
	}
	model_load_setup(l);
	if (model_file_find(core.cfg.model, &l->file, l->err,
	    sizeof(l->err)) != 0) {
		log_warnx("reload: %s; still %s", l->err, core.model_name);
		snprintf(core.cfg.model, sizeof(core.cfg.model), "%s",
		    reload.loaded.key);
		return 0;
	}
	if (strcmp(l->file.key, reload.loaded.key) == 0 &&
	    strcmp(l->file.path, reload.loaded.path) == 0 &&
	    model_file_same(&l->file, &reload.loaded)) {
		log_debug("reload: %s is the file loaded; model unchanged",
		    l->file.path);
		return 0;
	}
	log_info("reload: loading model %s from %s; sessions go on meanwhile",
	    l->file.key, l->file.path);
	if ((rc = pthread_create(&reload.thread, NULL, reload_main,
	    NULL)) != 0) {
		log_warnx("reload: cannot start a thread to load the model: "
		    "%s; still %s", strerror(rc), core.model_name);
		snprintf(core.cfg.model, sizeof(core.cfg.model), "%s",
		    reload.loaded.key);
		return 0;
	}
	reload.busy = 1;
	return 1;
}

/* At exit: wait for a load under way and drop what it loaded. */
void
reload_stop(void)
{
	if (reload.busy) {
		pthread_join(reload.thread, NULL);
		reload.busy = 0;
		sotto_model_free(reload.load.model);
		reload.load.model = NULL;
	}
	if (reload.done != NULL)
		event_free(reload.done);
	reload.done = NULL;
}

static void
reload_key(const char *section, const char *key, const char *old,
    const char *new, int live, void *arg)
{
	int *restart = arg;

	if (live) {
		log_info("reload: [%s] %s = %s (was %s)", section, key, new,
		    old);
		return;
	}
	log_warnx("reload: [%s] %s = %s needs a restart; still %s", section,
	    key, new, old);
	(*restart)++;
}

/* SIGHUP, from the loop: read the config again and apply what can be. */
void
reload_config(void)
{
	struct config cfg;
	char err[512];
	int n, restart = 0;

	systemd_notify_reloading();
	if (core.hooks->read_config(&cfg, err, sizeof(err)) != 0) {
		log_warnx("reload: %s; configuration not changed", err);
		systemd_notify_ready(NULL);
		return;
	}
	n = config_diff(&core.cfg, &cfg, reload_key, &restart);
	config_keep_restart_keys(&cfg, &core.cfg);
	core.cfg = cfg;
	core_totals.reloads++;
	core.hooks->applied(&core.cfg);
	core_doors_reload();
	vad_reload();
	log_info("reload: %s: %d change(s) applied, %d need a restart",
	    core.hooks->source(), n - restart, restart);
	if (!reload_model())
		systemd_notify_ready(NULL);
}
