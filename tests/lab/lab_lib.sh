# Shared by tests/lab/check_*.sh (sourced): verdict lines and the builds the
# checkers make from the library's objects. Needs LAB_WORK and, from the
# Makefile, LAB_CC, LAB_CFLAGS, LAB_LIB_CFLAGS, LAB_LDLIBS, LAB_BUILD.
LAB_FAILED=0
LAB_PASSED=0
BUILD_DIR=${LAB_BUILD:-build}

lab_pass() { echo "  PASS  $*"; LAB_PASSED=$((LAB_PASSED + 1)); }
lab_fail() { echo "  FAIL  $*"; LAB_FAILED=$((LAB_FAILED + 1)); }
# Indents a command's output under its verdict.
lab_show() { sed 's/^/        | /'; }

# Ends the checker: a summary, and exit 1 when anything failed.
lab_done() {
  if [[ $LAB_FAILED -eq 0 ]]; then
    echo "== lab exercise $1: all $LAB_PASSED checks passed"
    exit 0
  fi
  echo "== lab exercise $1: $LAB_FAILED of $((LAB_PASSED + LAB_FAILED)) checks FAILED (see above)"
  exit 1
}

# Runs a command with a time limit, so that a hang is a failure, not a wait.
lab_run() { local limit=$1; shift; timeout -k 5 "$limit" "$@"; }

# lab_archive OUT EXTRA.o...: the library's objects (the build's list, less
# its generated table of algorithms) plus the extra objects, and a table
# regenerated from algorithms/*.c plus EXTRA_ALGOS (a variable: source files
# of extra algorithms), into the archive OUT. An extra algorithm takes the
# place of the library's file of the same name (algorithms/allreduce_recdbl.c
# for exercise 02): that file's object and descriptor are left out, so the
# student's is the one graded.
lab_archive() {
  local out=$1; shift
  local objs table=$LAB_WORK/algorithms_table f names=" " srcs=() skip='/gen/algorithms\.o$'
  for f in ${EXTRA_ALGOS:-}; do
    names="$names$(basename "$f") "
    skip="$skip|/algorithms/$(basename "${f%.c}")\.o$"
  done
  for f in algorithms/*.c; do
    [[ $names == *" $(basename "$f") "* ]] || srcs+=("$f")
  done
  objs=$(tr ' ' '\n' < "$BUILD_DIR/lib-objects.list" | grep -Ev "$skip" | grep .)
  scripts/gen-algorithms.sh "${srcs[@]}" ${EXTRA_ALGOS:-} > "$table.c" || return 1
  $LAB_CC $LAB_LIB_CFLAGS -c "$table.c" -o "$table.o" || return 1
  rm -f "$out"
  ar rcs "$out" $objs "$table.o" "$@"
}

# lab_link OUT ARCHIVE OBJ-or-C...: a program from objects and C files
# (compiled with the tests' flags), the test harness archive and ARCHIVE.
lab_link() {
  local out=$1 archive=$2; shift 2
  local inputs=() f
  for f in "$@"; do
    if [[ $f == *.c ]]; then
      $LAB_CC $LAB_CFLAGS -c "$f" -o "$LAB_WORK/$(basename "${f%.c}").o" || return 1
      inputs+=("$LAB_WORK/$(basename "${f%.c}").o")
    else
      inputs+=("$f")
    fi
  done
  $LAB_CC -o "$out" "${inputs[@]}" "$BUILD_DIR/tests/libtestsupport.a" "$archive" $LAB_LDLIBS
}
