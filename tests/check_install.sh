#!/usr/bin/env bash
# `make install` as a distribution package would run it, and a program built
# against the result through pkg-config:
#   1. a copy of this tree (sources and build outputs, so nothing recompiles)
#      in /tmp is configured with this tree's options plus --prefix=/usr and a
#      multiarch libdir (/usr/lib/<triplet>, else /usr/lib64), and installed
#      into a DESTDIR; the libraries, header, plugin, bench programs and
#      rcoll.pc must land there, and nothing in /usr/lib itself;
#   2. rcoll.pc, read with PKG_CONFIG_SYSROOT_DIR=DESTDIR, gives the version,
#      the libdir, and in Libs.private every library librcoll.so NEEDs;
#   3. examples/*.c built with `pkg-config --cflags --libs rcoll` run against
#      the installed librcoll.so, and again linked with the installed
#      librcoll.a and `pkg-config --static --libs`;
#   4. `make install PREFIX=/opt/rcoll LIBDIR=/opt/rcoll/lib64 DESTDIR=...`
#      still moves everything, rcoll.pc's directories included.
# The tree's own config.mk and build are not touched. Skips (77) without
# pkg-config or before configure has run here.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1

skip() { echo "check_install: SKIP: $*"; exit 77; }
fail() { echo "check_install: FAIL: $*"; exit 1; }
command -v pkg-config >/dev/null || skip "pkg-config not found (scripts/setup-deps.sh installs it)"
[[ -x config.status && -f config.mk ]] || skip "this tree is not configured yet (run make first)"
EXAMPLES=$(ls examples/*.c 2>/dev/null)
[[ -n $EXAMPLES ]] || fail "no examples/*.c to build against the installed library"

VERSION=$(sed -n 's/^VERSION = //p' config.mk)
WERROR=$(sed -n 's/^ENABLE_WERROR = //p' config.mk)
CC=$(sed -n 's/^CC = //p' config.mk)
TRIPLET=$($CC -print-multiarch 2>/dev/null)
LIBDIR=/usr/lib${TRIPLET:+/$TRIPLET}
[[ -n $TRIPLET ]] || LIBDIR=/usr/lib64

SCRATCH=$(mktemp -d /tmp/rcoll-check-install.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
SRC=$SCRATCH/src DEST=$SCRATCH/root
mkdir -p "$SRC"
# make in the copy, free of what a calling make or the environment would pass
# down (make check's flags, a PREFIX exported for other tools).
mk() {
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u PREFIX -u BINDIR -u LIBDIR -u INCLUDEDIR -u PKGCONFIGDIR \
    make -C "$SRC" --no-print-directory "$@"
}

echo "-- configure a copy with --prefix=/usr --libdir=$LIBDIR, make install DESTDIR=..."
# Build outputs come along with their timestamps, so the copy only relinks
# what configure's new directories change (nothing: objects depend on the
# flags, which stay the same).
tar -c --exclude=./.git --exclude=./build-asan --exclude=./build-nodeps --exclude=./build/rxe \
  --exclude=./build/check-results --exclude=./build/dist --exclude=./build/distcheck \
  --exclude='./rcoll-*.tar.gz' . | tar -x -C "$SRC" || fail "copying the tree to $SRC failed"
# The options this tree was configured with; -Werror explicitly, since the
# copy has no .git to default it on.
eval "set -- $(./config.status --config)"
(cd "$SRC" && ./configure "$@" --enable-werror="$WERROR" --prefix=/usr --libdir="$LIBDIR" \
   >"$SCRATCH/configure.log" 2>&1) || { tail -n 20 "$SCRATCH/configure.log"; fail "configure failed"; }
mk install DESTDIR="$DEST" >"$SCRATCH/install.log" 2>&1 ||
  { tail -n 30 "$SCRATCH/install.log"; fail "make install failed"; }
if grep -E '^  (CC|NVCC) ' "$SCRATCH/install.log" | head -n 3 | grep -q .; then
  echo "   note: make install recompiled some objects (an out-of-date build?)"
fi

failed=0
need() { # file...
  local f
  for f in "$@"; do
    [[ -e $DEST$f ]] || { echo "   FAILED: $f was not installed"; failed=1; }
  done
}
need "$LIBDIR/librcoll.so.$VERSION" "$LIBDIR/librcoll.so.${VERSION%%.*}" "$LIBDIR/librcoll.so" \
  "$LIBDIR/librcoll.a" "$LIBDIR/pkgconfig/rcoll.pc" /usr/include/rcoll.h /usr/bin/allreduce_perf
compgen -G 'plugin/*.c' >/dev/null && need "$LIBDIR/libnccl-net-rcoll.so"
stray=$(find "$DEST/usr/lib" -maxdepth 1 \( -type f -o -type l \) 2>/dev/null)
[[ -z $stray ]] || { echo "   FAILED: installed into /usr/lib instead of $LIBDIR: $stray"; failed=1; }
[[ $failed == 0 ]] && echo "   libraries in $LIBDIR, header in /usr/include, programs in /usr/bin"

echo "-- rcoll.pc"
export PKG_CONFIG_LIBDIR=$DEST$LIBDIR/pkgconfig PKG_CONFIG_SYSROOT_DIR=$DEST PKG_CONFIG_PATH=
pc_version=$(pkg-config --modversion rcoll) || fail "pkg-config cannot read rcoll.pc"
pc_libdir=$(pkg-config --variable=libdir rcoll)
pc_static=$(pkg-config --static --libs rcoll)
echo "   Version $pc_version, libdir $pc_libdir; --static --libs: $pc_static"
[[ $pc_version == "$VERSION" ]] || { echo "   FAILED: Version is $pc_version, not $VERSION"; failed=1; }
[[ $pc_libdir == "$LIBDIR" || $pc_libdir == "$DEST$LIBDIR" ]] ||
  { echo "   FAILED: libdir is $pc_libdir, not $LIBDIR"; failed=1; }
# A static link needs every library the shared one NEEDs (beside libc's own).
for lib in $(readelf -d "$DEST$LIBDIR/librcoll.so.$VERSION" |
             sed -n 's/.*(NEEDED).*\[lib\([^.]*\)\.so.*/\1/p'); do
  case $lib in c | m | ld-linux* | pthread | dl | rt) continue ;; esac
  [[ " $pc_static " == *" -l$lib "* ]] ||
    { echo "   FAILED: librcoll.so needs lib$lib, but Libs.private does not list -l$lib"; failed=1; }
done

echo "-- examples against the installed tree"
cflags=$(pkg-config --cflags rcoll) libs=$(pkg-config --libs rcoll)
# The static link names the archive itself: -lrcoll would pick the .so.
static_libs=$(sed -E 's/(^| )-lrcoll( |$)/ /' <<<"$pc_static")
# -lm is the example's own (c_trainer calls exp), as any program adds it.
build_example() { # source name
  # shellcheck disable=SC2086 # pkg-config output is a list of words
  $CC -std=c11 -Wall -Wextra -O2 $cflags "$1" $libs -lm -o "$SCRATCH/$2" &&
    $CC -std=c11 -Wall -Wextra -O2 $cflags "$1" "$DEST$LIBDIR/librcoll.a" $static_libs -lm -o "$SCRATCH/$2-static"
}
for ex in $EXAMPLES; do
  name=$(basename "$ex" .c)
  # An MPI program is built by mpicc, not with pkg-config's flags alone.
  if grep -q '^#include <mpi.h>' "$ex"; then
    echo "   $name: not built here (an MPI program: mpicc and pkg-config)"
    continue
  fi
  if ! build_example "$ex" "$name" >"$SCRATCH/$name.cc.log" 2>&1; then
    echo "   FAILED: $ex does not build against the installed rcoll:"
    grep -E 'error|undefined' "$SCRATCH/$name.cc.log" | head -n 8
    failed=1
    continue
  fi
  loaded=$(LD_LIBRARY_PATH=$DEST$LIBDIR ldd "$SCRATCH/$name" | awk '/librcoll/{print $3}')
  [[ $loaded == "$DEST$LIBDIR/"* ]] ||
    { echo "   FAILED: $name loads librcoll from '$loaded', not the installed tree"; failed=1; }
  ! ldd "$SCRATCH/$name-static" | grep -q librcoll ||
    { echo "   FAILED: $name-static still loads librcoll.so"; failed=1; }
  for bin in "$name" "$name-static"; do
    # One rank launched from the environment, for the examples that start
    # as a launcher's rank (c_trainer); the others ignore these variables.
    # Exit status 77 with "skipped": the example needs what this build lacks
    # (device_buffers built without CUDA) and said so.
    LD_LIBRARY_PATH=$DEST$LIBDIR RCOLL_COMM_ID=127.0.0.1:0 WORLD_SIZE=1 RANK=0 \
      timeout -k 5 60 "$SCRATCH/$bin" >"$SCRATCH/$bin.out" 2>&1
    rc=$?
    if [[ $rc -eq 0 ]] || { [[ $rc -eq 77 ]] && grep -q skipped "$SCRATCH/$bin.out"; }; then
      echo "   $bin: ran ($(tail -n 1 "$SCRATCH/$bin.out"))"
    else
      echo "   FAILED: $bin exited with status $rc:"; tail -n 10 "$SCRATCH/$bin.out"; failed=1
    fi
  done
done

echo "-- make install PREFIX=/opt/rcoll LIBDIR=/opt/rcoll/lib64 DESTDIR=..."
DEST2=$SCRATCH/root2
mk install PREFIX=/opt/rcoll LIBDIR=/opt/rcoll/lib64 DESTDIR="$DEST2" >"$SCRATCH/install2.log" 2>&1 ||
  { tail -n 30 "$SCRATCH/install2.log"; fail "make install PREFIX=... failed"; }
DEST=$DEST2
need /opt/rcoll/lib64/librcoll.so /opt/rcoll/lib64/librcoll.a /opt/rcoll/include/rcoll.h \
  /opt/rcoll/bin/allreduce_perf /opt/rcoll/lib64/pkgconfig/rcoll.pc
if ! grep -qx 'libdir=/opt/rcoll/lib64' "$DEST2/opt/rcoll/lib64/pkgconfig/rcoll.pc" 2>/dev/null ||
   ! grep -qx 'includedir=/opt/rcoll/include' "$DEST2/opt/rcoll/lib64/pkgconfig/rcoll.pc"; then
  echo "   FAILED: rcoll.pc does not name /opt/rcoll/lib64 and /opt/rcoll/include"; failed=1
else
  echo "   everything under /opt/rcoll, rcoll.pc included"
fi
exit $failed
