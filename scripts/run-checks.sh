#!/usr/bin/env bash
# Runs rcoll's tests for `make check` and totals them. Each run records one
# line per binary or script in RESULTS/*.res, so that the summary can come at
# the very end, after everything ran, and failures do not stop later tests.
#
#   run-checks.sh criterion RESULTS BIN...   Criterion binaries, TEST_JOBS tests at a time
#   run-checks.sh scripts RESULTS SCRIPT...  tests/check_*.sh: exit 0 passes, 77 skips
#   run-checks.sh summary RESULTS            Criterion's synthesis per binary, then
#                                            "N passed, N failed"; fails if any failed
#
# A record is: "<passed> <failed> <skipped> <label>\t<summary line>".
set -uo pipefail

TEST_JOBS=${TEST_JOBS:-1}
# A whole binary or script may take this long before it is killed as hung.
# (Criterion 2.4.1's own --timeout option crashes its runner, so tests set
# .timeout themselves and this is the backstop.)
FILE_TIMEOUT=${FILE_TIMEOUT:-900}

# Records are numbered so that the summary lists them in the order they ran.
record() { # results passed failed skipped label line
  local n
  n=$(find "$1" -maxdepth 1 -name '*.res' | wc -l)
  printf '%s %s %s %s\t%s\n' "$2" "$3" "$4" "$5" "$6" \
    >"$1/$(printf '%04d' "$n")-$(echo "$5" | tr '/' '_').res"
}

run_criterion() {
  local results=$1 bin log rc line passed failed tested
  shift
  for bin in "$@"; do
    log="$results/$(echo "$bin" | tr '/' '_').log"
    echo "== $bin"
    timeout -k 10 "$FILE_TIMEOUT" "$bin" --jobs "$TEST_JOBS" --short-filename 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -a 'Synthesis: Tested:' "$log" | tail -n 1)
    if [[ -z "$line" ]]; then
      record "$results" 0 1 0 "$bin" "no Criterion synthesis (exit status $rc): the binary crashed or hung"
      continue
    fi
    tested=$(sed -n 's/.*Tested: \([0-9]*\).*/\1/p' <<<"$line")
    passed=$(sed -n 's/.*Passing: \([0-9]*\).*/\1/p' <<<"$line")
    failed=$((tested - passed))
    # Criterion does not count skipped tests nor print why without
    # --verbose: a binary that ran nothing (built without an optional
    # library) is run again to say why, so that the summary shows the reason.
    local skipped=0 why
    if [[ $tested -eq 0 && $rc -eq 0 ]]; then
      why=$(timeout -k 10 60 "$bin" --verbose --jobs 1 2>&1 | sed -n 's/^\[SKIP\] [^ ]*: //p')
      skipped=$(grep -c . <<<"$why")
      [[ -n $why ]] && line="$line (skipped: $(head -n 1 <<<"$why"))"
    fi
    # Criterion exits non-zero on failures it already counted; a non-zero exit
    # with none counted (a sanitizer report at exit, a kill) is one more.
    if [[ $rc -ne 0 && $failed -eq 0 ]]; then
      failed=1
      line="$line (but exit status $rc)"
    fi
    record "$results" "$passed" "$failed" "$skipped" "$bin" "$line"
  done
}

run_scripts() {
  local results=$1 script rc log
  shift
  for script in "$@"; do
    echo "== $script"
    # A copy of the output for the summary's failures. Through a process
    # substitution, which nobody waits for: a daemon a script leaves behind
    # holding its stdout cannot hold up the run.
    log="$results/$(echo "$script" | tr '/' '_').log"
    if [[ -x "$script" ]]; then
      timeout -k 10 "$FILE_TIMEOUT" "./$script" > >(tee "$log") 2>&1
    else
      echo "warning: $script is not executable; running it with bash" >&2
      timeout -k 10 "$FILE_TIMEOUT" bash "$script" > >(tee "$log") 2>&1
    fi
    rc=$?
    case $rc in
      0) record "$results" 1 0 0 "$script" "PASS" ;;
      77) record "$results" 0 0 1 "$script" "SKIP (exit 77)" ;;
      124 | 137) record "$results" 0 1 0 "$script" "FAIL (timed out after ${FILE_TIMEOUT}s)" ;;
      *) record "$results" 0 1 0 "$script" "FAIL (exit status $rc)" ;;
    esac
  done
}

summary() {
  local results=$1 passed=0 failed=0 skipped=0 p f s label line log
  echo
  echo "==================== test summary ===================="
  shopt -s nullglob
  for res in "$results"/*.res; do
    IFS=$'\t' read -r counts line <"$res"
    read -r p f s label <<<"$counts"
    printf '%-44s %s\n' "$label:" "$line"
    passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  done
  if [[ $((passed + failed + skipped)) -eq 0 ]]; then
    echo "no tests were run" >&2
    failed=1
  fi
  [[ $skipped -gt 0 ]] && echo "($skipped skipped)"
  # CI shows only the tail of this output: the failures come again here, last,
  # each with the end of its log, so that a failed run names what failed.
  if [[ $failed -gt 0 ]]; then
    echo "==================== failures ===================="
    for res in "$results"/*.res; do
      IFS=$'\t' read -r counts line <"$res"
      read -r p f s label <<<"$counts"
      [[ $f -eq 0 ]] && continue
      echo "--- $label: $line"
      log="$results/$(echo "$label" | tr '/' '_').log"
      [[ -f $log ]] && tail -n 20 "$log"
    done
  fi
  echo "$passed passed, $failed failed"
  [[ $failed -eq 0 ]]
}

cmd=${1:-}
[[ $# -ge 2 ]] || { echo "usage: $0 criterion|scripts|summary RESULTS [FILES...]" >&2; exit 2; }
shift
case $cmd in
  criterion) run_criterion "$@" ;;
  scripts) run_scripts "$@" ;;
  summary) summary "$@" ;;
  *) echo "unknown command: $cmd" >&2; exit 2 ;;
esac
