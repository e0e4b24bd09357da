#!/usr/bin/env bash
# Makes sure the Debian packages that rcoll's build and tests need are
# installed. Silent and fast (one dpkg-query) when they all are; otherwise, as
# root, runs `apt-get update` once and installs the missing ones; as another
# user, prints the command to run and fails.
#
#   RCOLL_SKIP_DEPS=1   skip the check (non-Debian systems, or you manage packages yourself)
#   RCOLL_EXTRA_DEPS    more package names to require, space separated
set -euo pipefail

packages=(
  build-essential autoconf pkg-config   # compiler, make, configure, pkg-config for rcoll.pc users
  libcriterion-dev                      # unit tests (make check)
  mpich libmpich-dev                    # bench programs under mpiexec
  libhwloc-dev                          # topology
  libibverbs-dev librdmacm-dev          # InfiniBand / RoCE transport
  libucx-dev                            # UCX transport
  iproute2                              # network-namespace tests (ip netns, tc)
  librsvg2-bin                          # rcoll_sched draws PNGs beside its SVGs (check_sched looks at them)
  python3                               # check_bench_json (nccl-tests JSON schema), scripts/rcoll-trace-merge
  python3-numpy python3-torch           # tests/check_python.sh: the Python package, torch backend
  python3-matplotlib                    # scripts/rcoll-plot: make demo's plot, tests/check_plot.sh
  clang libclang-rt-dev                 # libFuzzer harnesses (tests/check_fuzz.sh, make fuzz)
)
# shellcheck disable=SC2206 # word splitting is the point: a list of names
packages+=(${RCOLL_EXTRA_DEPS:-})

if [[ "${RCOLL_SKIP_DEPS:-0}" == 1 ]]; then
  exit 0
fi
if ! command -v dpkg-query >/dev/null 2>&1; then
  echo "setup-deps: not a Debian-based system; install the equivalents of:" >&2
  echo "  ${packages[*]}" >&2
  echo "then run with RCOLL_SKIP_DEPS=1 to skip this check." >&2
  exit 1
fi

# dpkg-query prints one line per known package; names it has never heard of
# go to stderr and simply do not appear, which counts as missing as well.
installed=$(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${packages[@]}" 2>/dev/null |
            awk '$2 == "ii" {print $1}') || true
missing=()
for p in "${packages[@]}"; do
  grep -qx -- "$p" <<<"$installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

install_cmd="apt-get install -y --no-install-recommends ${missing[*]}"
if [[ $(id -u) -ne 0 ]]; then
  echo "setup-deps: missing Debian packages: ${missing[*]}" >&2
  echo "Install them with:" >&2
  echo "  sudo apt-get update && sudo $install_cmd" >&2
  echo "(or set RCOLL_SKIP_DEPS=1 to build without this check)" >&2
  exit 1
fi

echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
# shellcheck disable=SC2086 # $install_cmd is a command line we built above
$install_cmd
echo "setup-deps: done"
