/*
 * What the program (sottod.c) asks of the core: set it up with the
 * configuration read, start it, run the loop, take it down; and the
 * checks of --check-config (check.c). Doors never include this.
 */
#ifndef SOTTOD_DAEMON_H
#define SOTTOD_DAEMON_H

#include <stddef.h>

#include "config.h"

/* The program's part in a reload and in the configuration. */
struct core_hooks {
	/*
	 * Read the configuration again (SIGHUP): defaults, the file, then
	 * the flags. 0, or -1 with err.
	 */
	int	(*read_config)(struct config *, char *err, size_t errlen);
	/* A configuration is in effect (after each reload). */
	void	(*applied)(const struct config *);
	/* What read_config reads, for the log: a path, or "defaults". */
	const char *(*source)(void);
};

/*
 * The loop, the model (or exit: fatalx with the reason) and the VAD
 * model for cfg; hooks (static storage) are kept. 0, or -1 with err.
 */
int	core_init(const struct config *cfg, const struct core_hooks *hooks,
	    char *err, size_t errlen);
/* Signals, the compute thread, timers, the microphone. 0 or -1 with err. */
int	core_start(char *err, size_t errlen);
/* The loop, until a drain ends it. */
void	core_run(void);
/* After core_run: every door stopped, every connection closed, freed. */
void	core_shutdown(void);

/*
 * check.c: --check-config's model checks. cfg as read from path, where
 * lines says each key was (both NULL: no file); model_flag: the model
 * came from --model. 0, or -1 with err.
 */
int	check_engine(const struct config *cfg, const char *path,
	    const struct config_lines *lines, int model_flag, char *err,
	    size_t errlen);
/*
 * The same for [http] listen and [wyoming] listen (or --http, --wyoming:
 * the flags): an HTTP address off loopback needs [http] token; the two
 * must not share a port.
 */
int	check_listeners(const struct config *cfg, const char *path,
	    const struct config_lines *lines, int http_flag, int wyoming_flag,
	    char *err, size_t errlen);

#endif
