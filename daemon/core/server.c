/*
 * The server: turns signals into a graceful drain, brings worker results
 * back onto the loop, and keeps systemd informed (STATUS, WATCHDOG). The
 * doors accept connections (each its own listener).
 *
 * Drain (SIGTERM, SIGINT): every door stops accepting; what streaming
 * clients wrote before the signal is taken (peer_drain_all, each door's
 * ops->drain),
 * then nothing more; every stream with someone to tell is finished, its
 * last finals and "end" are sent, and then its connection is closed;
 * idle connections are closed at once. The loop ends when no session is
 * decoding and no connection is left. When shutdown_grace_seconds pass
 * first (or on a second signal) the compute threads stop and every
 * stream ends at once, its "end" saying how much of its audio was not
 * decoded; the loop then ends once that is written, at most
 * SERVER_ABORT_MAX_S later. A third signal ends it at once; later ones
 * are ignored while it exits (server_hold). SIGHUP reloads
 * the config (reload.c). Signals arrive as libevent events, so all
 * of this runs on the loop, never in a signal handler.
 */
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "core-private.h"
#include "log.h"
#include "peer.h"
#include "session.h"
#include "systemd.h"
#include "worker.h"

#define SERVER_STATUS_S		5
#define SERVER_ABORT_MAX_S	5	/* after the grace: flush, then exit */

static struct {
	struct event		*sig[3];
	struct event		*wake;
	struct event		*status;
	struct event		*watchdog;
	struct event		*drain_timer;
	int			 exit_armed;	/* drain_timer: the last flush */
	struct timeval		 watchdog_tv;
} server;

static const int server_sigs[3] = { SIGTERM, SIGINT, SIGHUP };
static volatile sig_atomic_t server_held[3];

/*
 * The action libevent finds in place when it takes a signal, and so the
 * one it puts back when its event is freed at exit: the signal is noted,
 * never the default death. Installed before libevent's own handler, it
 * keeps a signal that comes in between (noted, then replayed on the loop);
 * put back at exit, it keeps a supervisor that signals until the process
 * is gone from killing it while a compute thread's step is joined or the
 * model freed: sottod still exits 0.
 */
static void
server_hold(int sig)
{
	size_t i;

	for (i = 0; i < 3; i++)
		if (server_sigs[i] == sig)
			server_held[i] = 1;
}

static void
server_worker_cb(int fd, short ev, void *arg)
{
	struct worker_result *r;

	while ((r = worker_next_result()) != NULL) {
		if (r->kind == WORKER_FILE)
			worker_file_done(r->file);	/* its owner frees it */
		else if (r->kind == WORKER_FILE_SEGMENTS)
			worker_file_segments(r);
		else
			session_result(r);
		worker_result_free(r);
	}
}

static void
server_status_cb(int fd, short ev, void *arg)
{
	systemd_notify_status("%d sessions, %d clients, lag %.1f s, "
	    "RTF %.2f", session_count(), peer_count(), session_max_lag(),
	    worker_step_seconds() * 1000.0 / core.cfg.step_ms);
}

static void
server_watchdog_cb(int fd, short ev, void *arg)
{
	systemd_notify_watchdog();
}

static void
server_exit_cb(int fd, short ev, void *arg)
{
	log_warnx("drain: clients still connected %d s after the streams "
	    "ended; exiting", SERVER_ABORT_MAX_S);
	event_base_loopexit(core.base, NULL);
}

/*
 * The grace is over (or a second signal): stop decoding, end every
 * stream now with what it did not decode, exit once that is written.
 */
static void
server_drain_abort(void)
{
	core.draining = 2;
	log_warnx("drain: %d streams still decoding; ending them now, with "
	    "what they did not decode", session_busy());
	worker_abort();
	session_abort_all();
	if (server.drain_timer != NULL)
		evtimer_del(server.drain_timer);
	server_drain_check();
}

static void
server_drain_timeout_cb(int fd, short ev, void *arg)
{
	log_warnx("drain: still busy after %d s (shutdown_grace_seconds)",
	    core.cfg.shutdown_grace_s);
	server_drain_abort();
}

/*
 * The grace is over and every stream has ended (a step that was running
 * at the abort had to return first, which may take a while on a loaded
 * machine): the clients have SERVER_ABORT_MAX_S to take their last words.
 */
static void
server_drain_arm_exit(void)
{
	struct timeval tv = { SERVER_ABORT_MAX_S, 0 };

	if (server.exit_armed || server.drain_timer == NULL ||
	    session_busy() > 0)
		return;
	server.exit_armed = 1;
	evtimer_assign(server.drain_timer, core.base, server_exit_cb, NULL);
	evtimer_add(server.drain_timer, &tv);
}

/* Exit the loop once a drain has nothing left to wait for. */
void
server_drain_check(void)
{
	if (core.draining > 1)
		server_drain_arm_exit();
	if (core.draining && session_busy() == 0 && peer_count() == 0 &&
	    core_doors_busy() == 0)
		event_base_loopexit(core.base, NULL);
}

static void
server_drain(void)
{
	struct timeval tv = { core.cfg.shutdown_grace_s, 0 };

	log_info("draining: finishing %d streams", session_busy());
	core.draining = 1;
	systemd_notify_stopping();
	core_doors_drain();
	session_mic_stop();
	peer_drain_all();	/* what came before the signal */
	session_drain_all();
	server.drain_timer = evtimer_new(core.base, server_drain_timeout_cb,
	    NULL);
	if (server.drain_timer != NULL)
		evtimer_add(server.drain_timer, &tv);
	server_drain_check();
}

static void
server_signal_cb(int sig, short ev, void *arg)
{
	if (sig == SIGHUP) {
		reload_config();
		return;
	}
	if (core.draining == 1) {
		log_info("second signal: ending the streams now");
		server_drain_abort();
		return;
	}
	if (core.draining) {
		log_info("third signal: exiting now");
		event_base_loopexit(core.base, NULL);
		return;
	}
	server_drain();
}

static int
server_timers(char *err, size_t errlen)
{
	struct timeval tv = { SERVER_STATUS_S, 0 };
	uint64_t usec;

	server.status = event_new(core.base, -1, EV_PERSIST,
	    server_status_cb, NULL);
	if (server.status == NULL || event_add(server.status, &tv) != 0)
		goto fail;
	if (!systemd_watchdog_interval_usec(&usec))
		return 0;
	server.watchdog_tv.tv_sec = (time_t)(usec / 2 / 1000000);
	server.watchdog_tv.tv_usec = (suseconds_t)(usec / 2 % 1000000);
	server.watchdog = event_new(core.base, -1, EV_PERSIST,
	    server_watchdog_cb, NULL);
	if (server.watchdog == NULL ||
	    event_add(server.watchdog, &server.watchdog_tv) != 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot set up timers");
	return -1;
}

/* Signals, the compute thread and the timers. 0, or -1 with err. */
/*
 * The compute threads (worker.c): [engine] workers of them (0: one per
 * engine thread, at most WORKER_THREADS_MAX), sharing the engine's
 * threads (-t, [engine] threads; 0: the cores this process may run on).
 * Steps of several streams at once on a core each: on two cores an
 * OpenMP team of two waits on itself at every one of a step's hundreds
 * of parallel regions (docs/architecture.md, "Threads").
 */
static int
server_workers(char *err, size_t errlen)
{
	cpu_set_t set;
	int cores = core.cfg.threads, n = core.cfg.workers;

	if (cores <= 0)
		cores = sched_getaffinity(0, sizeof(set), &set) == 0 ?
		    CPU_COUNT(&set) : 1;
	if (n <= 0)
		n = cores < WORKER_THREADS_MAX ? cores : WORKER_THREADS_MAX;
	if (worker_start(server.wake, n, cores, err, errlen) != 0)
		return -1;
	log_info("%d compute thread%s sharing %d engine thread%s", n,
	    n == 1 ? "" : "s", cores, cores == 1 ? "" : "s");
	return 0;
}

static int
server_signals(char *err, size_t errlen)
{
	struct sigaction sa;
	size_t i;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = server_hold;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_RESTART;
	for (i = 0; i < 3; i++) {
		if (sigaction(server_sigs[i], &sa, NULL) != 0) {
			snprintf(err, errlen, "cannot handle signals");
			return -1;
		}
		server.sig[i] = evsignal_new(core.base, server_sigs[i],
		    server_signal_cb, NULL);
		if (server.sig[i] == NULL || event_add(server.sig[i], NULL)) {
			snprintf(err, errlen, "cannot handle signals");
			return -1;
		}
		if (server_held[i]) {
			server_held[i] = 0;
			event_active(server.sig[i], EV_SIGNAL, 1);
		}
	}
	return 0;
}

int
server_start(char *err, size_t errlen)
{
	if (server_signals(err, errlen) != 0)
		return -1;
	server.wake = event_new(core.base, -1, 0, server_worker_cb, NULL);
	if (server.wake == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (server_workers(err, errlen) != 0)
		return -1;
	return server_timers(err, errlen);
}

/* Close everything; the loop has ended and the doors have stopped. */
void
server_stop(void)
{
	size_t i;

	/* Each puts back server_hold: later signals are noted, not fatal. */
	for (i = 0; i < 3; i++)
		if (server.sig[i] != NULL) {
			event_free(server.sig[i]);
			server.sig[i] = NULL;
		}
	peer_close_all();
	session_mic_stop();
	session_free_all();
	worker_stop();
	if (server.status != NULL)
		event_free(server.status);
	if (server.watchdog != NULL)
		event_free(server.watchdog);
	if (server.drain_timer != NULL)
		event_free(server.drain_timer);
	if (server.wake != NULL)
		event_free(server.wake);
}
