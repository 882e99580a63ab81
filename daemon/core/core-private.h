/*
 * The core's own parts, shared by its files and by nothing outside
 * daemon/core: its state, the models in use, the reload, the VAD model,
 * memory, and the server's loop glue. Doors see core.h, peer.h,
 * session.h and worker.h only.
 */
#ifndef SOTTOD_CORE_PRIVATE_H
#define SOTTOD_CORE_PRIVATE_H

#include <stddef.h>

#include "config.h"
#include "core.h"
#include "proto.h"
#include "sotto.h"

#define CORE_MAX_DOORS	8

struct core_hooks;
struct session;
struct worker_result;

/* The daemon's state: one per process (core.c). */
struct core {
	struct config		 cfg;
	struct event_base	*base;
	struct sotto_model	*model;		/* current (models.c owns it) */
	char			 model_name[PROTO_NAME_MAX];
	char			 model_compute[64];	/* sotto_model_info's */
	int			 multilingual;
	double			 started;	/* monotonic seconds */
	int			 draining;	/* 1 finishing streams, 2
						   ending them (grace over) */
	const struct door	*doors[CORE_MAX_DOORS];
	int			 n_doors;
	const struct core_hooks	*hooks;
};
extern struct core core;

/* Totals since the start (loop thread). */
struct core_totals {
	double		 audio_in_s;	/* audio received: streams, files */
	double		 audio_done_s;	/* audio the engine has decoded */
	uint64_t	 sessions;	/* streams opened */
	uint64_t	 files;		/* files transcribed */
	double		 files_compute_s;	/* compute time they took */
	uint64_t	 errors[CORE_ERROR_CODES];	/* error events sent */
	uint64_t	 reloads;
	uint64_t	 mic_xruns;
	double		 overload_s;	/* shared audio dropped */
};
extern struct core_totals core_totals;

/* core.c: counted where they happen, for /metrics */
void	core_count_error(enum proto_error);
void	core_count_session(const char *door);	/* a session opened */
void	core_count_step(double compute_s);	/* a stream step done */

/* core.c: the doors, in the order they registered */
void	core_doors_drain(void);
int	core_doors_busy(void);
void	core_doors_reload(void);
void	core_doors_stop(void);

/* models.c: the current model and those older sessions still use */
struct model_ref;
int	models_set_current(struct sotto_model *);
struct model_ref *models_take(void);
const struct sotto_model *models_model(const struct model_ref *);
int	models_is_current(const struct model_ref *);
void	models_drop(struct model_ref *);
void	models_free_all(void);
/* The file of a helper model (VAD, speakers) named in cfg, into buf. */
int	models_aux_path(const struct config *, const char *name, char *buf,
	    size_t len, char *err, size_t errlen);

/* reload.c: the config and the model again on SIGHUP */
int	reload_init(char *err, size_t errlen);
void	reload_config(void);
int	reload_model(void);
void	reload_stop(void);
void	reload_load_model(void);	/* at start, or exit */

/* vad.c: [engine] vad; the model is shared by every stream */
int	vad_start(char *err, size_t errlen);	/* at start */
void	vad_reload(void);			/* after a SIGHUP */
const struct sotto_vad *vad_for(int live);	/* NULL: no VAD */
void	vad_free(void);
/* --check-config: cfg's VAD model loads (when vad is not off). */
int	vad_check(const struct config *, char *err, size_t errlen);

/* speakers.c: [engine] speaker_model, loaded when first asked for */
void	speakers_free(void);			/* at exit */
/* --check-config: cfg's speaker model loads (when the file names one). */
int	speakers_check(const struct config *, char *err, size_t errlen);

/* mem.c */
void	mem_init(void);
void	mem_idle(void);		/* any thread */

/* server.c: signals, the drain, worker results, systemd's timers */
int	server_start(char *err, size_t errlen);
void	server_drain_check(void);
void	server_stop(void);

/* session.c, session-result.c, session-mic.c: the core's side */
void	session_result(struct worker_result *);
void	session_drain_all(void);
void	session_abort_all(void);
int	session_busy(void);
double	session_max_lag(void);
int64_t	session_last_final(const struct session *);
void	session_free_all(void);
/* diarize: label the speakers ([mic] diarize) */
struct session *session_shared_new(const char *name, int rate,
	    int channels, const char *language, int diarize);
void	session_shared_audio(struct session *, const int16_t *, size_t frames);
double	session_overload_s(const struct session *);
int	session_mic_start(char *err, size_t errlen);
void	session_mic_stop(void);

#endif
