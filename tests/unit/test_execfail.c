/* test_execfail.c - the failed-execve rule of monitor/execfail.h, fed attempts and connector
 * events directly (the integration tests drive it through a real container). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "monitor/execfail.h"

/* connector events handed to execfail_settle's drain, stamped when queued */
static struct
{
  int kind; /* 1 exec, 2 exit */
  pid_t tid, tgid;
  int code;
  uint64_t ts;
} evs[16];
static size_t nevs;

static uint64_t
mono (void)
{
  struct timespec t;
  clock_gettime (CLOCK_MONOTONIC, &t);
  return (uint64_t) t.tv_sec * 1000000000ull + (uint64_t) t.tv_nsec;
}

static void
ev (int kind, pid_t tid, pid_t tgid, int code)
{
  evs[nevs].kind = kind;
  evs[nevs].tid = tid;
  evs[nevs].tgid = tgid;
  evs[nevs].code = code;
  evs[nevs++].ts = mono ();
}

static void
drain (void *data)
{
  (void) data;
  for (size_t i = 0; i < nevs; i++)
    if (evs[i].kind == 1)
      execfail_note_exec (evs[i].tgid, evs[i].ts);
    else
      execfail_note_exit (evs[i].tid, evs[i].tgid, evs[i].ts, evs[i].code, true);
  nevs = 0;
}

static uint64_t
settle (void)
{
  return execfail_settle (drain, NULL);
}

static void
test_path_search_then_exec (void **state)
{
  (void) state;
  for (uint64_t d = 0; d < 30; d++)
    execfail_attempt (100, 100, 7, d); /* one command, 30 directories */
  ev (1, 100, 100, 0);
  ev (2, 100, 100, 0);
  assert_int_equal (settle (), 0);
}

static void
test_same_file_again_counts (void **state)
{
  (void) state;
  for (int i = 0; i < 10; i++)
    execfail_attempt (200, 200, 7, 1);
  assert_int_equal (settle (), 9); /* each repeat ends a run; the last is still open */
  ev (2, 200, 200, 0);
  assert_int_equal (settle (), 1); /* ... and ends with the process */
}

static void
test_no_double_count_with_exit (void **state)
{
  (void) state;
  execfail_attempt (300, 300, 7, 1);
  execfail_attempt (300, 300, 7, 2);
  ev (2, 300, 300, 127 << 8); /* `command not found`: one failure, not two */
  assert_int_equal (settle (), 1);
  ev (2, 301, 301, 1 << 8); /* no execve failure: the exit counts */
  assert_int_equal (settle (), 1);
  ev (2, 302, 302, 0);
  assert_int_equal (settle (), 0);
}

static void
test_other_command_and_thread_exit (void **state)
{
  (void) state;
  execfail_attempt (401, 400, 7, 1);
  execfail_attempt (401, 400, 8, 1); /* another command: the first run failed */
  execfail_attempt (402, 400, 9, 3); /* a second thread's own run */
  assert_int_equal (settle (), 1);
  ev (2, 402, 400, 0); /* the thread ends without an exec */
  assert_int_equal (settle (), 1);
  ev (1, 400, 400, 0); /* 401's run ends in an exec */
  ev (2, 400, 400, 0);
  assert_int_equal (settle (), 0);
}

static void
test_exec_before_next_attempt_is_success (void **state)
{
  (void) state;
  /* an exec chain: attempt, exec, the new image's attempt, exec - in time order, even when the
   * connector's events are drained after the second attempt was queued */
  execfail_attempt (500, 500, 7, 1);
  ev (1, 500, 500, 0);
  execfail_attempt (500, 500, 8, 2);
  ev (1, 500, 500, 0);
  ev (2, 500, 500, 0);
  assert_int_equal (settle (), 0);
}

static void
test_open_run_counts_when_old (void **state)
{
  (void) state;
  /* a thread tries one command in 63 directories and then stays alive: the open run counts
   * once it is EXECFAIL_RUN_AGE_NS old, not at the thread's exit, and only once */
  for (uint64_t d = 0; d < 63; d++)
    execfail_attempt (601, 600, 7, d);
  execfail_attempt (602, 600, 8, 1); /* a second thread, one attempt */
  assert_int_equal (settle (), 0);
  int ms = execfail_timeout_ms ();
  assert_true (ms > 0 && ms <= 1001);
  struct timespec t = { .tv_sec = 1, .tv_nsec = 50000000 };
  nanosleep (&t, NULL);
  assert_int_equal (settle (), 2);
  assert_int_equal (execfail_timeout_ms (), -1); /* nothing left to age */
  execfail_attempt (601, 600, 7, 70);            /* the counted run goes on: no second count */
  assert_int_equal (settle (), 0);
  ev (2, 602, 600, 0);
  ev (2, 600, 600, 0);
  assert_int_equal (settle (), 0);
}

static void
test_path_search_younger_than_the_age_counts_nothing (void **state)
{
  (void) state;
  for (uint64_t d = 0; d < 32; d++)
    execfail_attempt (700, 700, 7, d);
  ev (1, 700, 700, 0);
  assert_int_equal (settle (), 0);
  assert_int_equal (execfail_timeout_ms (), -1);
  ev (2, 700, 700, 0);
  assert_int_equal (settle (), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_path_search_then_exec),
    cmocka_unit_test (test_same_file_again_counts),
    cmocka_unit_test (test_no_double_count_with_exit),
    cmocka_unit_test (test_other_command_and_thread_exit),
    cmocka_unit_test (test_exec_before_next_attempt_is_success),
    cmocka_unit_test (test_open_run_counts_when_old),
    cmocka_unit_test (test_path_search_younger_than_the_age_counts_nothing),
  };
  return cmocka_run_group_tests (tests, NULL, NULL);
}
