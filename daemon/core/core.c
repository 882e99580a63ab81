/*
 * The core's state and what doors and the program ask of it (core.h,
 * daemon.h): the loop, the configuration in effect, the model, the
 * doors registered, and the figures of status and /metrics.
 *
 * Order at start (sottod.c): core_init (the loop, the model, the VAD
 * model), the doors (each registers itself), core_start (signals, the
 * compute thread, timers, the microphone), core_run. At the end,
 * core_shutdown stops the doors in the reverse order, then closes every
 * connection and frees the rest.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/thread.h>

#include "core-private.h"
#include "daemon.h"
#include "log.h"
#include "peer.h"
#include "session.h"
#include "worker.h"

struct core core;
struct core_totals core_totals;

_Static_assert(PROTO_E_TOO_FAST < CORE_ERROR_CODES, "core_totals.errors");

/* Sessions opened by door; stream steps by compute time (seconds). */
static struct {
	const char	*door;
	uint64_t	 n;
} core_opened[8];
static const double core_step_le[CORE_STEP_BUCKETS] = {
	0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
};
static uint64_t core_step_n[CORE_STEP_BUCKETS + 1];
static double core_step_s;

void
core_count_error(enum proto_error code)
{
	if ((unsigned)code < CORE_ERROR_CODES)
		core_totals.errors[code]++;
}

void
core_count_session(const char *door)
{
	size_t i;

	for (i = 0; i < sizeof(core_opened) / sizeof(core_opened[0]); i++)
		if (core_opened[i].door == NULL ||
		    strcmp(core_opened[i].door, door) == 0) {
			core_opened[i].door = door;
			core_opened[i].n++;
			return;
		}
}

void
core_count_step(double compute_s)
{
	int i;

	for (i = 0; i < CORE_STEP_BUCKETS && compute_s > core_step_le[i]; i++)
		;
	core_step_n[i]++;
	core_step_s += compute_s;
}

struct event_base *
core_base(void)
{
	return core.base;
}

const struct config *
core_config(void)
{
	return &core.cfg;
}

int
core_draining(void)
{
	return core.draining;
}

double
core_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

double
core_uptime(void)
{
	return core_now() - core.started;
}

const struct sotto_model *
core_model(void)
{
	return core.model;
}

const char *
core_model_name(void)
{
	return core.model_name;
}

int
core_multilingual(void)
{
	return core.multilingual;
}

void
core_door_add(const struct door *d)
{
	if (core.n_doors == CORE_MAX_DOORS)
		fatalx("more than %d front doors", CORE_MAX_DOORS);
	core.doors[core.n_doors++] = d;
}

void
core_doors_drain(void)
{
	int i;

	for (i = 0; i < core.n_doors; i++)
		if (core.doors[i]->drain != NULL)
			core.doors[i]->drain();
}

int
core_doors_busy(void)
{
	int i, n = 0;

	for (i = 0; i < core.n_doors; i++)
		if (core.doors[i]->busy != NULL)
			n += core.doors[i]->busy();
	return n;
}

void
core_doors_reload(void)
{
	int i;

	for (i = 0; i < core.n_doors; i++)
		if (core.doors[i]->reload != NULL)
			core.doors[i]->reload();
}

/* Last registered, first stopped. */
void
core_doors_stop(void)
{
	int i;

	for (i = core.n_doors - 1; i >= 0; i--)
		if (core.doors[i]->stop != NULL)
			core.doors[i]->stop();
	core.n_doors = 0;
}

void
core_drain_check(void)
{
	server_drain_check();
}

const char *
core_unhealthy(void)
{
	if (core.model == NULL)
		return "no model loaded";
	if (!worker_alive())
		return "the compute thread is not running";
	if (core.draining)
		return "stopping";
	return NULL;
}

void
core_stats(struct core_stats *st)
{
	struct session *mic = session_mic();

	memset(st, 0, sizeof(*st));
	st->sessions = session_count();
	st->clients = peer_count();
	st->subscribers = peer_count_subscribed();
	st->queue_depth = worker_queue_depth();
	st->max_lag_s = session_max_lag();
	st->rtf = worker_step_seconds() * 1000.0 / core.cfg.step_ms;
	st->uptime_s = core_uptime();
	st->healthy = core_unhealthy() == NULL;
	st->mic = session_mic_state();
	st->mic_overload_s = mic != NULL ? session_overload_s(mic) : 0;
	st->dropped_partials = peer_dropped_partials();
	st->audio_in_s = core_totals.audio_in_s;
	st->audio_done_s = core_totals.audio_done_s;
	st->sessions_total = core_totals.sessions;
	st->files_total = core_totals.files;
	st->files_compute_s = core_totals.files_compute_s;
	memcpy(st->errors, core_totals.errors, sizeof(st->errors));
	st->reloads = core_totals.reloads;
	st->mic_xruns = core_totals.mic_xruns;
	st->overload_s = core_totals.overload_s;
	memcpy(st->opened, core_opened, sizeof(st->opened));
	memcpy(st->step_le, core_step_le, sizeof(st->step_le));
	memcpy(st->step_n, core_step_n, sizeof(st->step_n));
	st->step_s = core_step_s;
}

void
core_count_file(double audio_s, double compute_s)
{
	core_totals.audio_in_s += audio_s;
	core_totals.audio_done_s += audio_s;
	core_totals.files++;
	core_totals.files_compute_s += compute_s;
}

/* libevent's own messages, into our log. */
static void
core_event_log(int severity, const char *msg)
{
	if (severity >= EVENT_LOG_WARN)
		log_debug("libevent: %s", msg);
}

int
core_init(const struct config *cfg, const struct core_hooks *hooks,
    char *err, size_t errlen)
{
	core.cfg = *cfg;
	core.hooks = hooks;
	core.started = core_now();
	mem_init();
	reload_load_model();
	if (vad_start(err, errlen) != 0)
		return -1;
	event_set_log_callback(core_event_log);
	if (evthread_use_pthreads() != 0 ||
	    (core.base = event_base_new()) == NULL ||
	    reload_init(err, errlen) != 0) {
		snprintf(err, errlen, "cannot set up the event loop");
		return -1;
	}
	return 0;
}

int
core_start(char *err, size_t errlen)
{
	if (server_start(err, errlen) != 0)
		return -1;
	return session_mic_start(err, errlen);
}

void
core_run(void)
{
	event_base_dispatch(core.base);
}

void
core_shutdown(void)
{
	core_doors_stop();
	server_stop();
	event_base_loop(core.base, EVLOOP_NONBLOCK);
	reload_stop();
	models_free_all();
	vad_free();
	speakers_free();
	event_base_free(core.base);
	core.base = NULL;
}
