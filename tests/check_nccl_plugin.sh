#!/usr/bin/env bash
# lib/libnccl-net-rcoll.so as NCCL meets it (the ABI itself is exercised by
# tests/test_nccl_plugin.c):
#  1. it exports ncclNetPlugin_v8..v11 and no other symbol, and every library
#     it needs resolves;
#  2. the installed NCCL (libnccl.so.2) looks up symbols we export and plugin
#     files named libnccl-net-*;
#  3. a host program loads NCCL, then finds the plugin by the name NCCL derives
#     from NCCL_NET_PLUGIN=rcoll through the loader path, and asks NCCL for a
#     one-rank communicator with NCCL_DEBUG=INFO. With a GPU, NCCL must report
#     that it loaded the rcoll plugin; without one NCCL stops at its CUDA
#     check before any plugin is loaded, and the script says so.
# Exit 77 (skip) when there is no libnccl.so.2, after the checks that need
# none.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

PLUGIN=${RCOLL_NCCL_PLUGIN:-lib/libnccl-net-rcoll.so}
[[ -f $PLUGIN ]] || { echo "$PLUGIN is missing: run make first" >&2; exit 1; }
PLUGIN_DIR=$(cd "$(dirname "$PLUGIN")" && pwd)

echo "-- exports of $PLUGIN"
exports=$(nm -D --defined-only "$PLUGIN" | awk '{print $3}' | sort | tr '\n' ' ')
want="ncclNetPlugin_v10 ncclNetPlugin_v11 ncclNetPlugin_v8 ncclNetPlugin_v9 "
if [[ $exports != "$want" ]]; then
  echo "   FAILED: exports are '$exports', expected '$want'"
  exit 1
fi
echo "   $exports"
if ldd "$PLUGIN" | grep -q "not found"; then
  echo "   FAILED: unresolved libraries:"; ldd "$PLUGIN" | grep "not found"
  exit 1
fi

NCCL=${NCCL_LIB:-}
if [[ -z $NCCL ]]; then
  NCCL=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2 /{print $NF; exit}')
  for f in /usr/local/cuda*/lib*/libnccl.so.2 /usr/lib/*/libnccl.so.2; do
    [[ -z $NCCL && -f $f ]] && NCCL=$f
  done
fi
if [[ -z $NCCL || ! -f $NCCL ]]; then
  echo "SKIP: no libnccl.so.2 here (set NCCL_LIB to point at one)"
  exit 77
fi

echo "-- $NCCL looks up"
found=$(grep -a -o 'ncclNetPlugin_v[0-9]*' "$NCCL" | sort -u | tr '\n' ' ')
echo "   $found"
ours=0
for v in 8 9 10 11; do
  [[ " $found " == *" ncclNetPlugin_v$v "* ]] && ours=$((ours + 1))
done
if [[ $ours -eq 0 ]] || ! grep -a -q 'libnccl-net' "$NCCL"; then
  echo "   FAILED: this NCCL looks up none of ncclNetPlugin_v8..v11 (or no libnccl-net-* files)"
  exit 1
fi

echo "-- a host program: NCCL, then the plugin by name, then a 1-rank communicator"
# The host program is compiled here, from this script: it needs nothing from
# NCCL but the library (no nccl.h), declaring the four entry points it calls.
TMP=$(mktemp -d) || exit 1
trap 'rm -rf "$TMP"' EXIT
cat >"$TMP/host.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*version_fn)(int *);
typedef int (*unique_id_fn)(char *);
typedef int (*comm_init_fn)(void **, int, char[128], int);
typedef int (*comm_destroy_fn)(void *);

int main(int argc, char **argv) {
  void *nccl = argc > 1 ? dlopen(argv[1], RTLD_NOW | RTLD_LOCAL) : NULL;
  if (nccl == NULL) { printf("host: dlopen NCCL: %s\n", dlerror()); return 1; }
  version_fn get_version = (version_fn)dlsym(nccl, "ncclGetVersion");
  unique_id_fn get_id = (unique_id_fn)dlsym(nccl, "ncclGetUniqueId");
  comm_init_fn comm_init = (comm_init_fn)dlsym(nccl, "ncclCommInitRank");
  comm_destroy_fn comm_destroy = (comm_destroy_fn)dlsym(nccl, "ncclCommDestroy");
  int version = 0;
  if (!get_version || !get_id || !comm_init || !comm_destroy || get_version(&version) != 0) return 1;
  printf("host: NCCL version code %d\n", version);
  /* NCCL opens "libnccl-net-<NCCL_NET_PLUGIN>.so" through the loader path. */
  char name[300];
  snprintf(name, sizeof name, "libnccl-net-%s.so", getenv("NCCL_NET_PLUGIN"));
  void *plugin = dlopen(name, RTLD_NOW | RTLD_LOCAL);
  if (plugin == NULL) { printf("host: dlopen %s: %s\n", name, dlerror()); return 1; }
  for (int v = 11; v >= 8; v--) {
    char sym[32];
    snprintf(sym, sizeof sym, "ncclNetPlugin_v%d", v);
    const char **table = dlsym(plugin, sym); /* the first slot is the name */
    if (table == NULL || strcmp(table[0], "rcoll") != 0) { printf("host: %s missing or misnamed\n", sym); return 1; }
    printf("host: %s exports %s named %s\n", name, sym, table[0]);
  }
  char id[128];
  void *comm = NULL;
  if (get_id(id) != 0) return 1;
  int r = comm_init(&comm, 1, id, 0);
  printf("host: ncclCommInitRank(1 rank) returned %d\n", r);
  if (r == 0) comm_destroy(comm);
  return 0;
}
EOF
if ! ${CC:-cc} -std=c11 -D_GNU_SOURCE -O1 -Wall -Werror -o "$TMP/host" "$TMP/host.c" -ldl; then
  echo "   FAILED: the host program did not compile"
  exit 1
fi
out=$(LD_LIBRARY_PATH="$PLUGIN_DIR:$(dirname "$NCCL")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      NCCL_NET_PLUGIN=rcoll NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV RCOLL_NET=socket \
      timeout -k 5 120 "$TMP/host" "$NCCL" 2>&1)
rc=$?
echo "$out" | sed 's/^/   /'
if [[ $rc -ne 0 ]] || ! grep -q "exports ncclNetPlugin_v8 named rcoll" <<<"$out"; then
  echo "   FAILED: the host program could not load NCCL and the plugin side by side (exit $rc)"
  exit 1
fi
if grep -q "ncclCommInitRank(1 rank) returned 0" <<<"$out"; then
  if ! grep -q "Loaded net plugin rcoll" <<<"$out"; then
    echo "   FAILED: NCCL made a communicator but did not report loading the rcoll plugin"
    exit 1
  fi
  echo "   NCCL loaded the rcoll plugin"
else
  echo "   NCCL could not make a communicator here (no usable GPU), so it never reached plugin"
  echo "   loading; the plugin was checked by name, symbols and ABI only (tests/test_nccl_plugin.c)"
fi
exit 0
