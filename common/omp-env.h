/* omp-env.c: OpenMP's idle-thread policy, set before libgomp starts. */
#ifndef SOTTO_OMP_ENV_H
#define SOTTO_OMP_ENV_H

enum omp_wait {
	OMP_WAIT_SLEEP,	/* idle threads sleep at once (a daemon) */
	OMP_WAIT_SPIN	/* idle threads spin a little first (batch work) */
};

/*
 * Unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, set the policy for
 * wait and re-exec argv; returns (without changes) if the re-exec fails.
 * Call it first in main(), before any thread starts.
 */
void	omp_env_reexec(char **argv, enum omp_wait wait);

#endif
