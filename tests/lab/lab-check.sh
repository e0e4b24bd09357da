#!/usr/bin/env bash
# `make lab-check EX=n [LAB_DIR=dir]`: grades exercise n of the lab course
# (docs/lab/README.md) in LAB_DIR (docs/lab, the student's copy, by default;
# tests/check_lab.sh also grades tests/lab/solutions). The Makefile passes the
# compiler, the flags and the build directory in LAB_* variables. Everything
# an exercise builds goes under $LAB_BUILD/lab/, never into the source tree.
# Prints what was checked, PASS or FAIL per check in words, and exits 0 only
# when every check passed.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
EX=${1:-}
LAB_DIR=${2:-docs/lab}
usage="usage: make lab-check EX=n [LAB_DIR=dir]  (n: 1..6; docs/lab/README.md lists them)"
[[ $EX =~ ^0?[1-6]$ ]] || { echo "lab-check: EX=\"$EX\" is not an exercise number. $usage" >&2; exit 2; }
NN=$(printf '%02d' "$((10#$EX))")
shopt -s nullglob
dirs=("$LAB_DIR"/"$NN"-*/)
[[ ${#dirs[@]} -eq 1 ]] || { echo "lab-check: no single directory $LAB_DIR/$NN-*/ (found ${#dirs[@]})" >&2; exit 2; }
EXDIR=${dirs[0]%/}
checker=(tests/lab/check_"$NN"*.sh)
[[ ${#checker[@]} -eq 1 ]] || { echo "lab-check: no checker tests/lab/check_$NN-*.sh" >&2; exit 2; }
# A scratch directory per exercise and per graded copy, so that grading the
# student's files and the solutions never share a build.
export LAB_WORK=${LAB_BUILD:-build}/lab/$(printf '%s' "$LAB_DIR" | tr -c 'A-Za-z0-9_\n' '_')/ex$NN
rm -rf "$LAB_WORK" && mkdir -p "$LAB_WORK" || exit 2
echo "== lab exercise $NN: grading $EXDIR/ (work in $LAB_WORK/)"
bash "${checker[0]}" "$EXDIR"
