#!/bin/bash
# Builds the initramfs of the Soft-RoCE test VM (adapted from the recipe in
# shared/softroce): busybox, the verbs tools (ibv_devinfo, ib_write_bw, rdma,
# ip), the given test programs with every library ldd lists, the rxe provider
# (dlopen'ed, so ldd never shows it) and libgcc_s (dlopen'ed by glibc for
# thread cancellation), and the kernel modules for virtio-net and rdma_rxe in
# load order. crc32_generic is a soft dependency of rdma_rxe missing from
# modules.dep: without it `rdma link add` fails with "No such file or directory".
#
#   build-initramfs.sh OUT.cpio.gz KVER GUEST_DIR PROGRAM...
# GUEST_DIR's files (init, guest.sh) go to / and /rxe.
set -euo pipefail
OUT=$1 KVER=$2 GUEST=$3
shift 3
R=$(mktemp -d "${TMPDIR:-/tmp}/rxe-root.XXXXXX")
trap 'rm -rf "$R"' EXIT

mkdir -p "$R"/{bin,sbin,usr/bin,usr/sbin,usr/lib,usr/lib64,etc,proc,sys,dev,tmp,run,root,rxe}
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
mkdir -p "$R/lib/modules/$KVER" "$R/etc/libibverbs.d"
cp /bin/busybox "$R/bin/busybox"

copy_with_deps() { # file [destination]: the file and every library ldd resolves for it
  local f=$1 dst=${2:-$1} lib
  mkdir -p "$R$(dirname "$dst")"
  cp -L "$f" "$R$dst"
  ldd "$f" 2>/dev/null | awk '/=>/ {print $3} /^[ \t]*\/lib64/ {print $1}' | while read -r lib; do
    [[ -n $lib && -e $lib && ! -e $R$lib ]] || continue
    mkdir -p "$R$(dirname "$lib")"
    cp -L "$lib" "$R$lib"
  done
}

for b in ibv_devinfo ib_write_bw rdma ip; do
  copy_with_deps "$(command -v "$b")"
done
# tc and netem, when the host has them: the xstress step's packet loss.
command -v tc >/dev/null && copy_with_deps "$(command -v tc)" /usr/sbin/tc
for p in "$@"; do
  copy_with_deps "$p" "/rxe/$(basename "$p")"
done
MULTIARCH=$(dirname "$(ldd /bin/true | awk '/libc.so/ {print $3}')")
copy_with_deps "$MULTIARCH/libibverbs/librxe-rdmav34.so"
cp /etc/libibverbs.d/rxe.driver "$R/etc/libibverbs.d/"
cp -L /lib64/ld-linux-x86-64.so.2 "$R/lib64/"
cp -L "$MULTIARCH/libgcc_s.so.1" "$R$MULTIARCH/"
echo "root:x:0:0:root:/root:/bin/sh" >"$R/etc/passwd"
echo "root:x:0:" >"$R/etc/group"
printf '127.0.0.1 localhost\n' >"$R/etc/hosts"

: >"$R/etc/modules.order"
for m in virtio_pci virtio_net crc32_generic rdma_rxe; do
  modprobe -S "$KVER" --show-depends "$m" | awk '$1 == "insmod" {print $2}'
done | awk '!seen[$0]++' >"$R/modules.list"
modprobe -S "$KVER" --show-depends sch_netem 2>/dev/null | awk '$1 == "insmod" {print $2}' >>"$R/modules.list" || true
awk '!seen[$0]++' "$R/modules.list" | while read -r ko; do
  cp "$ko" "$R/lib/modules/$KVER/"
  basename "$ko" >>"$R/etc/modules.order"
done
rm -f "$R/modules.list"

install -m 755 "$GUEST/init" "$R/init"
install -m 755 "$GUEST/guest.sh" "$R/rxe/guest.sh"
(cd "$R" && find . -print0 | cpio --null -o -H newc --quiet) | gzip -1 >"$OUT"
