/*
 * Unit tests for daemon/core/worker-sched.c: which job the compute thread
 * runs next. A file that has waited WORKER_FILE_WAIT_S runs before live
 * streams, which otherwise always come first; FREE jobs first of all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "worker-private.h"

static struct worker_job_list jobs;
static struct worker_job pool[8];
static int n_jobs;

static struct worker_job *
job(enum worker_kind kind, struct worker_stream *ws, double queued_at)
{
	struct worker_job *j = &pool[n_jobs++];

	memset(j, 0, sizeof(*j));
	j->kind = kind;
	j->ws = ws;
	j->queued_at = queued_at;
	TAILQ_INSERT_TAIL(&jobs, j, entry);
	return j;
}

static int
setup(void **state)
{
	(void)state;
	TAILQ_INIT(&jobs);
	n_jobs = 0;
	return 0;
}

static void
test_live_before_a_new_file(void **state)
{
	struct worker_stream live = { .live = 1 };
	struct worker_job *file, *step;

	(void)state;
	file = job(WORKER_FILE, NULL, 10.0);
	step = job(WORKER_STEP, &live, 10.1);
	assert_ptr_equal(worker_sched_next(&jobs, 1, 10.2), step);
	/* worker_yield: no files at all */
	assert_ptr_equal(worker_sched_next(&jobs, 0, 10.2), step);
	(void)file;
}

static void
test_file_waits_no_longer(void **state)
{
	struct worker_stream a = { .live = 1 }, b = { .live = 1 };
	struct worker_job *file;

	(void)state;
	job(WORKER_STEP, &a, 10.0);
	file = job(WORKER_FILE, NULL, 10.1);
	job(WORKER_STEP, &b, 10.2);
	assert_ptr_equal(worker_sched_next(&jobs, 1,
	    10.1 + WORKER_FILE_WAIT_S), file);
	/* but never from worker_yield, inside another file */
	assert_ptr_not_equal(worker_sched_next(&jobs, 0,
	    10.1 + WORKER_FILE_WAIT_S), file);
}

static void
test_oldest_waiting_file_first(void **state)
{
	struct worker_job *old;

	(void)state;
	old = job(WORKER_FILE, NULL, 5.0);
	job(WORKER_FILE, NULL, 6.0);
	assert_ptr_equal(worker_sched_next(&jobs, 1, 20.0), old);
}

static void
test_free_first(void **state)
{
	struct worker_stream a = { .live = 1 }, gone = { 0 };
	struct worker_job *f;

	(void)state;
	job(WORKER_FILE, NULL, 0.0);
	job(WORKER_STEP, &a, 1.0);
	f = job(WORKER_FREE, &gone, 2.0);
	assert_ptr_equal(worker_sched_next(&jobs, 1, 30.0), f);
}

/* Bulk streams and young files by least attained service. */
static void
test_bulk_by_attained(void **state)
{
	struct worker_stream served = { .attained_s = 3 },
	    fresh = { .attained_s = 1 };
	struct worker_job *j;

	(void)state;
	job(WORKER_STEP, &served, 1.0);
	j = job(WORKER_STEP, &fresh, 2.0);
	assert_ptr_equal(worker_sched_next(&jobs, 1, 2.1), j);
	j = job(WORKER_FILE, NULL, 2.05);	/* counts as none */
	assert_ptr_equal(worker_sched_next(&jobs, 1, 2.1), j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_live_before_a_new_file, setup),
		cmocka_unit_test_setup(test_file_waits_no_longer, setup),
		cmocka_unit_test_setup(test_oldest_waiting_file_first, setup),
		cmocka_unit_test_setup(test_free_first, setup),
		cmocka_unit_test_setup(test_bulk_by_attained, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
