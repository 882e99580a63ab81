/*
 * The core of sottod, as a front door sees it: the loop and its clock,
 * the configuration in effect, the model sessions open on, whether
 * sottod is stopping, the door's own registration, and the figures of
 * status and /metrics. Connections are in peer.h, sessions in session.h,
 * whole-file jobs in worker.h.
 *
 * A door asks the core through these calls and is told things only
 * through the hooks it registers (struct door, struct peer_ops): the core
 * never names a door. Everything here runs on the loop thread.
 */
#ifndef SOTTOD_CORE_H
#define SOTTOD_CORE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "sotto.h"

#ifndef SOTTO_VERSION
#define SOTTO_VERSION	"0"
#endif
#define SOTTOD_SERVER_NAME	"sottod/" SOTTO_VERSION

struct event_base;

struct event_base *core_base(void);
/* The configuration in effect; a SIGHUP may change it between calls. */
const struct config *core_config(void);
/* 0 running; 1 draining (finishing streams); 2 ending them now. */
int	core_draining(void);
double	core_now(void);			/* monotonic seconds */
double	core_uptime(void);

/* The model new sessions open on (it changes on a reload). */
const struct sotto_model *core_model(void);
const char *core_model_name(void);
int	core_multilingual(void);
/*
 * The Silero VAD loaded ([engine] vad not off), for a door that cuts
 * turns itself (the Realtime API's server_vad); NULL when none is.
 */
const struct sotto_vad *core_vad(void);
/*
 * What speaker labels need (sotto_diarize(), live labels): the speaker
 * model of [engine] speaker_model and a VAD, loaded by the first call.
 * 0, or -1 with why and what to do in err (the model is not fetched). The
 * models stay valid until sottod exits; the compute thread may use them.
 */
int	core_speakers(const struct sotto_speaker **, const struct sotto_vad **,
	    char *err, size_t errlen);

/*
 * A front door, registered by its own start function. The core calls
 * these hooks; it knows no door by name.
 */
struct door {
	const char	*name;
	/* SIGTERM: take no new connections or requests. */
	void		(*drain)(void);
	/* Requests a drain still waits for (NULL: none ever). */
	int		(*busy)(void);
	/* A SIGHUP applied a new configuration (may be NULL). */
	void		(*reload)(void);
	/* The loop is over: free everything (may be NULL). */
	void		(*stop)(void);
};
/* The door (static storage) is kept until core_shutdown(). */
void	core_door_add(const struct door *);
/* A door's busy() may have reached 0: end a drain if nothing is left. */
void	core_drain_check(void);

/* Error event codes counted (enum proto_error), and step histogram. */
#define CORE_ERROR_CODES	32
#define CORE_STEP_BUCKETS	8

/* The figures of a status event and of GET /metrics. */
struct core_stats {
	int		 sessions;	/* decoding now (max_sessions) */
	int		 clients;	/* connections of every door */
	int		 subscribers;
	int		 queue_depth;	/* jobs waiting for the compute thread */
	double		 max_lag_s;
	double		 rtf;		/* step compute time over step audio */
	double		 uptime_s;
	int		 healthy;	/* model, compute thread, not stopping */
	int		 mic;		/* -1 off, 0 down, 1 capturing */
	double		 mic_overload_s;
	uint64_t	 dropped_partials;
	/* totals since the start */
	double		 audio_in_s;	/* received: streams and files */
	double		 audio_done_s;	/* decoded */
	uint64_t	 sessions_total;	/* streams opened */
	uint64_t	 files_total;	/* files transcribed over HTTP */
	double		 files_compute_s;
	uint64_t	 errors[CORE_ERROR_CODES];	/* error events sent */
	uint64_t	 reloads;	/* SIGHUPs that applied a config */
	uint64_t	 mic_xruns;	/* capture overruns */
	double		 overload_s;	/* shared audio dropped, behind */
	/* sessions opened by door ("socket", "ws", "wyoming", "realtime",
	   "mic") */
	struct {
		const char	*door;
		uint64_t	 n;
	}		 opened[8];
	/* stream steps by compute time: step_n[i] took <= step_le[i] s
	   (not cumulative); the last bucket is +Inf */
	double		 step_le[CORE_STEP_BUCKETS];
	uint64_t	 step_n[CORE_STEP_BUCKETS + 1];
	double		 step_s;
};
void	core_stats(struct core_stats *);
/*
 * NULL while sottod serves (the model loaded, the compute thread
 * running, not stopping); else why not, for GET /health.
 */
const char *core_unhealthy(void);
/* A file transcribed over HTTP: its audio and compute seconds. */
void	core_count_file(double audio_s, double compute_s);
/*
 * A door freed a big buffer (an upload): give free memory back to the
 * system (mem.c), as when the last stream ends.
 */
void	core_trim_memory(void);

#endif
