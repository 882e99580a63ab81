/*
 * OpenMP's idle-thread policy, set before libgomp starts: the compute
 * threads of sotto, sottod and sotto-bench call this first in main().
 *
 * A decoder step opens about 38 (tiny.en) to 56 (base) parallel
 * regions, tens of microseconds apart. Waking a sleeping thread costs
 * about 17 us per region on these machines, a spinning one about 1.4
 * us. So batch work (`sotto transcribe`, sotto-bench) lets an idle
 * thread spin for GOMP_SPINCOUNT=1000 rounds (12-27 us: a pause takes
 * 12 ns on the AMX Xeons, 27 on the AVX2 EPYC; long enough to cover
 * most gaps inside a step) before it sleeps. The 118 s long-form
 * file with tiny.en, 2 threads, interleaved runs (2026-11-22):
 *
 *   spin count       quiet machine   another 2-thread job running
 *   passive          2.78, 3.05 s    3.81, 4.48 s
 *   1000             2.34, 2.59 s    4.94, 5.21 s
 *   3000             2.41, 2.72 s    5.65, 6.27 s
 *   10000            2.46, 2.99 s    9.24, 10.18 s
 *
 * Longer spins take the core the other job needs (libgomp's default,
 * 300000, once stalled decoder steps for half a second), so the count
 * stays short; several jobs at once should use -t 1 each or set
 * OMP_WAIT_POLICY=passive. sottod sleeps at once (passive): it runs an
 * event loop beside its compute team, and a spinning worker would take
 * the core that loop needs.
 *
 * libgomp reads its environment when it loads, before main(), so set it
 * and re-exec. A user's OMP_WAIT_POLICY or GOMP_SPINCOUNT is kept.
 */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include "omp-env.h"

/*
 * The file to re-exec: the binary's own path, since the kernel names a
 * process after the file it executes, and one started from
 * /proc/self/exe is "exe" to ps, pgrep and the journal. /proc/self/exe
 * itself when that path no longer holds an executable (the binary was
 * replaced since the start: the link then reads "... (deleted)").
 */
static const char *
self_path(char *buf, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", buf, size - 1);

	if (n <= 0 || (size_t)n >= size - 1)
		return "/proc/self/exe";
	buf[n] = '\0';
	return access(buf, X_OK) == 0 ? buf : "/proc/self/exe";
}

void
omp_env_reexec(char **argv, enum omp_wait wait)
{
	char path[PATH_MAX];

	if (getenv("OMP_WAIT_POLICY") != NULL ||
	    getenv("GOMP_SPINCOUNT") != NULL)
		return;
	if (wait == OMP_WAIT_SPIN)
		setenv("GOMP_SPINCOUNT", "1000", 1);
	else
		setenv("OMP_WAIT_POLICY", "passive", 1);
	execv(self_path(path, sizeof(path)), argv);
	/* on failure, run on with libgomp's defaults */
}
