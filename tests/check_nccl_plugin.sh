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
# Exit 77 (skip) when libnccl.so.2 or python3 (the host program's language)
# is missing, after the checks that need neither.
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

PY=$(command -v python3 || true)
if [[ -z $PY ]]; then
  echo "SKIP: python3 is missing; the host-program check did not run"
  exit 77
fi

echo "-- a host program: NCCL, then the plugin by name, then a 1-rank communicator"
out=$(LD_LIBRARY_PATH="$PLUGIN_DIR:$(dirname "$NCCL")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
      NCCL_NET_PLUGIN=rcoll NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV RCOLL_NET=socket \
      timeout -k 5 120 "$PY" - "$NCCL" 2>&1 <<'EOF'
import ctypes, os, sys
nccl = ctypes.CDLL(sys.argv[1], mode=os.RTLD_LOCAL)
v = ctypes.c_int(0)
assert nccl.ncclGetVersion(ctypes.byref(v)) == 0
print("host: NCCL version code", v.value)
# NCCL opens "libnccl-net-<NCCL_NET_PLUGIN>.so" through the loader path.
name = "libnccl-net-%s.so" % os.environ["NCCL_NET_PLUGIN"]
plugin = ctypes.CDLL(name, mode=os.RTLD_LOCAL)
for ver in (11, 10, 9, 8):
    table = ctypes.c_void_p.in_dll(plugin, "ncclNetPlugin_v%d" % ver)
    name_ptr = ctypes.cast(ctypes.addressof(table), ctypes.POINTER(ctypes.c_char_p))[0]
    print("host: %s exports ncclNetPlugin_v%d named %s" % (name, ver, name_ptr.decode()))
    assert name_ptr == b"rcoll"
uid = ctypes.create_string_buffer(128)
assert nccl.ncclGetUniqueId(uid) == 0
comm = ctypes.c_void_p()
r = nccl.ncclCommInitRank(ctypes.byref(comm), 1, uid, 0)
print("host: ncclCommInitRank(1 rank) returned", r)
if r == 0:
    nccl.ncclCommDestroy(comm)
EOF
)
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
