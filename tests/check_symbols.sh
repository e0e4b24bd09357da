#!/usr/bin/env bash
# rcoll must not define global symbols outside its own namespace, or a
# program that links it could find its own ib_connect or socket_send replaced
# (or refused as a duplicate) by ours. Lists the global defined symbols of
#   lib/librcoll.so             dynamic symbols: rcoll*
#   lib/librcoll.a              what a static link sees: rcoll*
#   lib/libnccl-net-rcoll.so    dynamic symbols: ncclNet* (the plugin ABI)
# and fails on any other. Before that it runs the same check on a library
# holding one stray global (ib_stray_global), which must fail, so that a
# broken check cannot pass unnoticed.
#
#   tests/check_symbols.sh              the built libraries (RCOLL_LIBOUT=lib)
#   tests/check_symbols.sh FILE...      those files, against rcoll*/ncclNet*
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
LIBOUT=${RCOLL_LIBOUT:-lib}

command -v nm >/dev/null || { echo "check_symbols: SKIP: nm (binutils) not found" >&2; exit 77; }

# Symbols that the linker itself defines in every shared object with some
# binutils versions (section boundaries, not rcoll code), so they may appear.
LINKER_DEFINED='^(_init|_fini|_edata|_end|__bss_start)$'

# globals FILE: the names of the global symbols FILE defines, one a line.
globals() {
  case $1 in
    *.a) nm -g --defined-only -P "$1" ;;
    *) nm -D --defined-only -P "$1" ;;
  esac | awk 'NF >= 2 && $2 ~ /^[A-Za-z]$/ {print $1}' | sort -u
}

# check FILE PATTERN: fails, listing them, when FILE defines globals that
# match neither PATTERN nor the linker's own.
check() {
  local file=$1 pattern=$2 names stray
  [[ -f $file ]] || { echo "   FAILED: $file is missing: run make first"; return 1; }
  names=$(globals "$file") || { echo "   FAILED: nm could not read $file"; return 1; }
  stray=$(grep -Ev "$pattern" <<<"$names" | grep -Ev "$LINKER_DEFINED")
  if [[ -n $stray ]]; then
    echo "   FAILED: $file defines $(wc -l <<<"$stray") global symbol(s) outside ${pattern}:"
    sed 's/^/     /' <<<"$stray" | head -n 40
    return 1
  fi
  echo "   $file: $(grep -c . <<<"$names") global symbols, all ${pattern}"
}

if [[ $# -gt 0 ]]; then
  failed=0
  for f in "$@"; do
    check "$f" '^(rcoll|ncclNet)' || failed=1
  done
  exit $failed
fi

# ---- the check must catch a stray global, in a shared library and an archive
echo "-- negative control: a library with a stray global must fail"
SCRATCH=$(mktemp -d /tmp/rcoll-check-symbols.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
printf 'int rcollFine(void) { return 0; }\nint ib_stray_global(void) { return 1; }\n' >"$SCRATCH/stray.c"
if ! { ${CC:-cc} -fPIC -c "$SCRATCH/stray.c" -o "$SCRATCH/stray.o" &&
       ${CC:-cc} -shared "$SCRATCH/stray.o" -o "$SCRATCH/libstray.so" &&
       ar rcs "$SCRATCH/libstray.a" "$SCRATCH/stray.o"; }; then
  echo "   FAILED: cannot build the control library"
  exit 1
fi
for f in "$SCRATCH/libstray.so" "$SCRATCH/libstray.a"; do
  if out=$(check "$f" '^rcoll') || ! grep -q ib_stray_global <<<"$out"; then
    echo "   FAILED: the check passed $f, which defines ib_stray_global"
    exit 1
  fi
  echo "   $(basename "$f"): caught ib_stray_global"
done

# ---- the real libraries
echo "-- global symbols of the built libraries"
failed=0
check "$LIBOUT/librcoll.so" '^rcoll' || failed=1
check "$LIBOUT/librcoll.a" '^rcoll' || failed=1
# The plugin exists when plugin/ has sources (the Makefile builds it then).
if compgen -G 'plugin/*.c' >/dev/null; then
  check "$LIBOUT/libnccl-net-rcoll.so" '^ncclNet' || failed=1
fi
exit $failed
