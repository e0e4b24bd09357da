/* Settings: the loader refuses what it does not understand (values out of
 * their declared range, malformed numbers, names that are no setting) and
 * says so once, naming the variable, its value and what it accepts. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "config.h"
#include "error.h"
#include "log.h"

/* WARN lines, caught through the log sink instead of stderr. */
static char logged[16][1024];
static int nlogged;

static void catch_line(int level, const char *msg) {
  if (level == RCOLL_LOG_WARN && nlogged < 16)
    snprintf(logged[nlogged++], sizeof logged[0], "%s", msg);
}

static int lines_with(const char *a, const char *b) {
  int n = 0;
  for (int i = 0; i < nlogged; i++)
    n += strstr(logged[i], a) != NULL && (b == NULL || strstr(logged[i], b) != NULL);
  return n;
}

static void catch_setup(void) {
  nlogged = 0;
  rcoll_log_set_sink(catch_line);
}

static void catch_teardown(void) { rcoll_log_set_sink(NULL); }

TestSuite(config, .init = catch_setup, .fini = catch_teardown);

static void expect_refused(const char *var, const char *value, const char *const needles[]) {
  rcoll_settings_t s;
  setenv(var, value, 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument, "%s=%s was accepted", var, value);
  for (int i = 0; needles[i] != NULL; i++)
    cr_assert(strstr(rcoll_error_text(), needles[i]) != NULL, "\"%s\" does not say %s", rcoll_error_text(),
              needles[i]);
  unsetenv(var);
}

/* The example: a negative chunk used to be raised to 4096 silently. */
Test(config, a_value_out_of_range_is_an_error_naming_it_and_the_range) {
  expect_refused("RCOLL_CHUNK_SIZE", "-5", (const char *const[]){"RCOLL_CHUNK_SIZE=-5", "4096..67108864", NULL});
  expect_refused("RCOLL_CHUNK_SIZE", "1G", (const char *const[]){"RCOLL_CHUNK_SIZE=1G", "4096..67108864", NULL});
  expect_refused("RCOLL_NSLOTS", "17", (const char *const[]){"RCOLL_NSLOTS=17", "2..16", NULL});
  expect_refused("RCOLL_TIMEOUT", "0", (const char *const[]){"RCOLL_TIMEOUT=0", "1..", NULL});
  expect_refused("RCOLL_SHM_DISABLE", "2", (const char *const[]){"RCOLL_SHM_DISABLE=2", "0..1", NULL});
  expect_refused("RCOLL_IB_SL", "16", (const char *const[]){"RCOLL_IB_SL=16", "0..15", NULL});
  expect_refused("RCOLL_SHM_CMA_THRESHOLD", "-1", (const char *const[]){"0 or more", NULL});
}

Test(config, a_malformed_number_is_an_error_naming_it_and_the_range) {
  expect_refused("RCOLL_TIMEOUT", "5s", (const char *const[]){"RCOLL_TIMEOUT=\"5s\"", "not an integer", NULL});
  expect_refused("RCOLL_CHUNK_SIZE", "99999999999G", (const char *const[]){"not an integer", "4096..", NULL});
}

/* A word setting takes its declared words only (STR_OF). */
Test(config, a_word_setting_refuses_other_words_listing_them) {
  expect_refused("RCOLL_SOCKET_FAMILY", "AF_INET7",
                 (const char *const[]){"RCOLL_SOCKET_FAMILY=AF_INET7 is not accepted: one of AF_INET,AF_INET6", NULL});
  expect_refused("RCOLL_IB_FLUSH", "sometimes",
                 (const char *const[]){"RCOLL_IB_FLUSH=sometimes", "auto,0,off,force", "default auto", NULL});
  expect_refused("NCCL_IB_ADDR_FAMILY", "ipv4", (const char *const[]){"NCCL_IB_ADDR_FAMILY=ipv4", NULL});
  rcoll_settings_t s;
  setenv("RCOLL_CUDA_WAIT", "Kernel", 1);
  setenv("RCOLL_SOCKET_FAMILY", "", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "any case, and empty, are accepted: %s", rcoll_error_text());
}

/* A value taken from NCCL's name is held to the same range, and the message
 * says how to give rcoll a value of its own. */
Test(config, an_nccl_fallback_out_of_range_names_both_variables) {
  expect_refused("NCCL_IB_QPS_PER_CONNECTION", "32",
                 (const char *const[]){"NCCL_IB_QPS_PER_CONNECTION=32", "1..16", "RCOLL_IB_QPS_PER_CONNECTION", NULL});
  rcoll_settings_t s;
  setenv("NCCL_IB_QPS_PER_CONNECTION", "32", 1);
  setenv("RCOLL_IB_QPS_PER_CONNECTION", "4", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
}

/* Eight ranks of rcollCommInitAll read the same environment: one line. */
Test(config, the_same_error_is_logged_once) {
  rcoll_settings_t s;
  setenv("RCOLL_NSLOTS", "99", 1);
  for (int i = 0; i < 3; i++)
    cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument);
  cr_assert_eq(lines_with("RCOLL_NSLOTS=99", NULL), 1, "%d lines", nlogged);
  setenv("RCOLL_NSLOTS", "98", 1);
  cr_assert_eq(rcoll_settings_load(&s), rcollInvalidArgument);
  cr_assert_eq(lines_with("RCOLL_NSLOTS=98", NULL), 1, "a different mistake is logged too");
}

Test(config, a_misspelled_name_warns_once_with_the_closest_setting) {
  rcoll_settings_t s;
  setenv("RCOLL_TIMOUT", "5", 1);
  setenv("RCOLL_SOCKET_NTHREAD", "4", 1);
  setenv("RCOLL_ZZZZZZZZZZZZZZZ", "1", 1);
  setenv("RCOLL_TEST_REQUIRE_NET", "socket", 1); /* the test scripts' own: no warning */
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
  cr_assert_eq(lines_with("RCOLL_TIMOUT is not an rcoll setting", "did you mean RCOLL_TIMEOUT?"), 1,
               "%d lines, first: %s", nlogged, logged[0]);
  cr_assert_eq(lines_with("RCOLL_SOCKET_NTHREAD ", "RCOLL_SOCKET_NTHREADS?"), 1);
  cr_assert_eq(lines_with("RCOLL_ZZZZZZZZZZZZZZZ", "did you mean"), 0, "a far name suggests nothing");
  cr_assert_eq(lines_with("RCOLL_ZZZZZZZZZZZZZZZ", NULL), 1);
  cr_assert_eq(lines_with("TEST_REQUIRE_NET", NULL), 0);
  cr_assert_eq(s.timeout, 300, "the misspelled one is ignored");
}

Test(config, suggestions_come_from_every_transports_settings) {
  cr_assert_str_eq(rcoll_settings_suggest("TIMOUT"), "TIMEOUT");
  cr_assert_str_eq(rcoll_settings_suggest("CHUNKSIZE"), "CHUNK_SIZE");
  cr_assert_str_eq(rcoll_settings_suggest("IB_GID_IDX"), "IB_GID_INDEX");
  cr_assert_str_eq(rcoll_settings_suggest("SHM_SLOT"), "SHM_SLOTS");
  cr_assert_null(rcoll_settings_suggest("COMPLETELY_DIFFERENT"));
}

/* Every default is accepted by its own range, and a range a help text
 * states ("(1..16)") is the declared one: the table and its words agree. */
Test(config, every_default_is_in_range_and_help_texts_agree) {
  rcoll_settings_t s;
  cr_assert_eq(rcoll_settings_load(&s), rcollSuccess, "%s", rcoll_error_text());
  for (int i = 0; i < rcoll_settings_count(); i++) {
    rcoll_setting_info_t info;
    rcoll_settings_describe(i, &info);
    if (!info.is_int)
      continue;
    int64_t v;
    cr_assert_eq(rcoll_settings_parse_int(info.def, &v), 0, "RCOLL_%s default %s", info.name, info.def);
    cr_assert(v >= info.lo && v <= info.hi, "RCOLL_%s default %s outside its range", info.name, info.def);
    const char *dots = strstr(info.help, "..");
    if (dots == NULL)
      continue;
    const char *p = dots;
    while (p > info.help && strchr("-0123456789", p[-1]) != NULL)
      p--;
    char lo_text[32], hi_text[32];
    int64_t lo, hi;
    snprintf(lo_text, sizeof lo_text, "%.*s", (int)(dots - p), p);
    snprintf(hi_text, sizeof hi_text, "%.*s", (int)strspn(dots + 2, "0123456789KMG"), dots + 2);
    if (rcoll_settings_parse_int(lo_text, &lo) != 0 || rcoll_settings_parse_int(hi_text, &hi) != 0)
      continue; /* "rank order 0..n-1" is no range of values */
    cr_assert(lo == info.lo && hi == info.hi, "RCOLL_%s: help says %s..%s, declared %lld..%lld", info.name,
              lo_text, hi_text, (long long)info.lo, (long long)info.hi);
  }
}

/* The communicator's slot array is RCOLL_MAX_SLOTS long: NSLOTS may not
 * declare more. */
Test(config, nslots_range_fits_the_communicator) {
  for (int i = 0; i < rcoll_settings_count(); i++) {
    rcoll_setting_info_t info;
    rcoll_settings_describe(i, &info);
    if (strcmp(info.name, "NSLOTS") == 0)
      cr_assert_eq(info.hi, RCOLL_MAX_SLOTS);
  }
}
