/*
 * OpenMP's idle-thread policy, set before libgomp starts: the compute
 * threads of sotto, sottod and sotto-bench call this first in main().
 *
 * A decoder step opens about 50 parallel regions (one per product and
 * attention), a few tens of microseconds apart. Waking a sleeping
 * thread costs about 17 us per region on these machines, a spinning one
 * about 1.4 us, so for batch work (`sotto transcribe`, sotto-bench) the
 * idle thread spins for GOMP_SPINCOUNT rounds (about 1-3 ms) before it
 * sleeps: steps of tiny.en and base took 10-20% less than with passive
 * sleep (/tmp harness and the 118 s long-form file, interleaved runs,
 * 2026-11-22), and the thread still sleeps between files or windows of
 * silence.
 *
 * sottod sleeps at once (passive): besides its compute team it runs an
 * event loop that must answer clients, and on 2 cores a spinning worker
 * takes the core that loop needs. (Earlier, with oneDNN running the
 * decoder, libgomp's default spin stalled some steps for over half a
 * second on a loaded machine; that is another reason the daemon does
 * not spin.)
 *
 * libgomp reads its environment when it loads, before main(), so set it
 * and re-exec. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
 */
#include <stdlib.h>
#include <unistd.h>

#include "omp-env.h"

void
omp_env_reexec(char **argv, enum omp_wait wait)
{
	if (getenv("OMP_WAIT_POLICY") != NULL ||
	    getenv("GOMP_SPINCOUNT") != NULL)
		return;
	if (wait == OMP_WAIT_SPIN)
		setenv("GOMP_SPINCOUNT", "100000", 1);
	else
		setenv("OMP_WAIT_POLICY", "passive", 1);
	execv("/proc/self/exe", argv);
	/* on failure, run on with libgomp's defaults */
}
