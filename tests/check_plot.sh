#!/usr/bin/env bash
# scripts/rcoll-plot on real inputs:
#   1. two short all-reduce runs (2 ranks as threads; shm, then RCOLL_NET=socket)
#      written with -J, plotted alone (PNG, and by default next to its input)
#      and overlaid with --limit (SVG): the PNGs are PNGs of some size, the
#      SVGs parse as XML and hold the axis titles, the size labels of the
#      sweep's ends, the legend labels (from the files, and --label's), the
#      limit's label, and for every run and panel one marker per size that
#      the file holds;
#   2. tests/data/linkcheck_4ranks.json (4 ranks, one slow link) as heat maps:
#      host labels, both panel titles, the slow link's value and outlier
#      line, and exactly one outlined cell, the slow link's;
#      a real bench/rcoll_linkcheck run too, where the tree has it;
#   3. bad input (a missing file, not JSON, a wrong schema, a bad --limit or
#      extension, a link check overlaid) gives exit status 2 and one line
#      naming the file or the option, and writes nothing; with matplotlib
#      hidden from python, exit status 3 and the package to install.
# Skips (77) when Debian's python has no matplotlib (scripts/setup-deps.sh
# installs python3-matplotlib).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
PY=/usr/bin/python3
[[ -x $PY ]] || { echo "SKIP: no $PY (scripts/setup-deps.sh installs python3)"; exit 77; }
$PY -c 'import matplotlib' 2>/dev/null ||
  { echo "SKIP: matplotlib missing for $PY (apt-get install python3-matplotlib)"; exit 77; }
make --no-print-directory bench/allreduce_perf >/dev/null || exit 1
BIN=${BENCH_DIR:-bench}
PLOT=scripts/rcoll-plot
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

plot() { # args...: runs rcoll-plot, which must succeed
  local out
  out=$("$PLOT" "$@" 2>&1) || { fail "rcoll-plot $*: exit status $?"; echo "$out"; }
}

is_png() { # file
  $PY - "$1" <<'PY' || fail "$1: not a PNG of some size"
import struct, sys
b = open(sys.argv[1], "rb").read(32)
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", "magic"
w, h = struct.unpack(">II", b[16:24])
assert w >= 300 and h >= 200, (w, h)
PY
}

# svg_has FILE TEXT...: the SVG parses as XML and every TEXT is one of its text elements.
svg_has() {
  $PY - "$@" <<'PY' || fail "$1: see above"
import sys, xml.etree.ElementTree as ET
texts = {"".join(t.itertext()).strip() for t in ET.parse(sys.argv[1]).iter("{http://www.w3.org/2000/svg}text")}
missing = [w for w in sys.argv[2:] if w not in texts]
if missing:
    print(f"{sys.argv[1]}: no text {missing}; it has {sorted(texts)}")
    sys.exit(1)
PY
}

# svg_markers FILE JSON RUN PANEL: the line group run<RUN>-<PANEL> holds one
# marker per result of JSON with a size above 0 (the log axis cannot show 0).
svg_markers() {
  $PY - "$@" <<'PY' || fail "$1: $4 of run $3: see above"
import json, sys, xml.etree.ElementTree as ET
svg, data, run, panel = sys.argv[1:5]
ns = "{http://www.w3.org/2000/svg}"
want = sum(1 for r in json.load(open(data))["results"] if r["size"] > 0)
groups = [g for g in ET.parse(svg).iter(ns + "g") if g.get("id") == f"run{run}-{panel}"]
got = len(list(groups[0].iter(ns + "use"))) if groups else -1
if got != want:
    print(f"{svg}: group run{run}-{panel} has {got} markers, the file {want} sizes")
    sys.exit(1)
PY
}

# The legend's default label, read from a -J file as the docs describe it:
# collective, transport (first word), algorithm ("tuned: a,b" when the tuner
# picked several over the sweep).
default_label() {
  $PY - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
rc = d["config"]["rcoll"]
algos = []
for r in d["results"]:
    if r["rcoll"]["algorithm"] not in algos:
        algos.append(r["rcoll"]["algorithm"])
algo = algos[0] if len(algos) == 1 else "tuned: " + ",".join(algos)
print(rc["collective"], rc["transports"][0]["transport"].split()[0], algo)
PY
}

echo "-- bench runs"
"$BIN/allreduce_perf" -t 2 -b 8 -e 64K -f 4 -n 3 -w 1 -J "$TMP/shm.json" >"$TMP/shm.log" 2>&1 ||
  { fail "bench (shm): exit status $?"; tail -n 5 "$TMP/shm.log"; }
RCOLL_NET=socket "$BIN/allreduce_perf" -t 2 -b 8 -e 64K -f 4 -n 3 -w 1 -J "$TMP/sock.json" \
  >"$TMP/sock.log" 2>&1 || { fail "bench (socket): exit status $?"; tail -n 5 "$TMP/sock.log"; }
[[ -s $TMP/shm.json && -s $TMP/sock.json ]] || { echo "FAIL: the bench wrote no JSON"; exit 1; }
SHM_LABEL=$(default_label "$TMP/shm.json")
SOCK_LABEL=$(default_label "$TMP/sock.json")
[[ $SHM_LABEL == "all_reduce shm "* && $SOCK_LABEL == "all_reduce socket "* ]] ||
  fail "the runs did not use shm and socket: '$SHM_LABEL', '$SOCK_LABEL'"

echo "-- one run, PNG (default name) and SVG"
plot "$TMP/shm.json"
is_png "$TMP/shm.png"
plot "$TMP/shm.json" -o "$TMP/one.svg"
svg_has "$TMP/one.svg" "bus bandwidth (GB/s)" "time per call" "message size (bytes, log2 scale)" \
  8B 32K "$SHM_LABEL"
svg_markers "$TMP/one.svg" "$TMP/shm.json" 0 busbw
svg_markers "$TMP/one.svg" "$TMP/shm.json" 0 time

echo "-- two runs overlaid with --limit, PNG and SVG"
plot "$TMP/shm.json" "$TMP/sock.json" --limit '1.25:10 GbE' -o "$TMP/two.png"
is_png "$TMP/two.png"
plot "$TMP/shm.json" "$TMP/sock.json" --limit '1.25:10 GbE' --label "shared memory" -o "$TMP/two.svg"
svg_has "$TMP/two.svg" "shared memory" "$SOCK_LABEL" "10 GbE" "bus bandwidth (GB/s)" \
  "time per call"
for run in 0 1; do
  json=$TMP/shm.json
  [[ $run == 1 ]] && json=$TMP/sock.json
  svg_markers "$TMP/two.svg" "$json" $run busbw
  svg_markers "$TMP/two.svg" "$json" $run time
done
plot "$TMP/shm.json" "$TMP/sock.json" --metric time -o "$TMP/time.svg"
svg_has "$TMP/time.svg" "time per call" "$SHM_LABEL" "$SOCK_LABEL"
! grep -q 'bus bandwidth (GB/s)' "$TMP/time.svg" || fail "--metric time drew a bandwidth panel"

echo "-- link check heat map"
LC=tests/data/linkcheck_4ranks.json
plot "$LC" -o "$TMP/lc.png"
is_png "$TMP/lc.png"
plot "$LC" -o "$TMP/lc.svg"
svg_has "$TMP/lc.svg" "0 node-a" "3 node-d" "bandwidth (GB/s), sender to receiver" \
  "latency (us, one way)" "0.31" "rank 2 (node-c) → rank 3 (node-d): 0.27 of median bandwidth"
outlined=$(grep -o 'id="outlier-[a-z]*-[0-9]*-[0-9]*"' "$TMP/lc.svg" | sort | tr '\n' ' ')
[[ $outlined == 'id="outlier-bandwidth-2-3" ' ]] ||
  fail "heat map: outlined cells are '$outlined', expected the slow link 2 -> 3 only"

# outlined FILE.json FILE.svg: the SVG outlines exactly the file's outliers.
outlined() {
  $PY - "$1" "$2" <<'PY' || fail "$2: the outlined cells are not $1's outliers"
import json, re, sys
want = sorted({f"outlier-{o['what']}-{o['src']}-{o['dst']}" for o in json.load(open(sys.argv[1]))["outliers"]})
got = sorted(set(re.findall(r'id="(outlier-[a-z]+-[0-9]+-[0-9]+)"', open(sys.argv[2]).read())))
if got != want:
    print(f"outlined {got}, the file's outliers {want}")
    sys.exit(1)
PY
}
outlined "$LC" "$TMP/lc.svg"

# Where the tree has bench/rcoll_linkcheck, its own file too: whatever this
# busy machine measured (exit status 1 is "links out of line", not an error),
# the map names every rank and outlines what the file calls out of line.
if [[ -f bench/rcoll_linkcheck.c ]]; then
  echo "-- a real bench/rcoll_linkcheck run (3 ranks as threads)"
  make --no-print-directory bench/rcoll_linkcheck >/dev/null || fail "make bench/rcoll_linkcheck"
  timeout -k 5 120 "$BIN/rcoll_linkcheck" -t 3 -b 256K -n 3 -k 20 -J "$TMP/real.json" >"$TMP/real.log" 2>&1
  rc=$?
  if [[ $rc -gt 1 || ! -s $TMP/real.json ]]; then
    fail "rcoll_linkcheck: exit status $rc"; tail -n 5 "$TMP/real.log"
  else
    plot "$TMP/real.json" -o "$TMP/real.svg"
    host=$($PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["hosts"][2])' "$TMP/real.json")
    svg_has "$TMP/real.svg" "0 $host" "2 $host" "bandwidth (GB/s), sender to receiver"
    outlined "$TMP/real.json" "$TMP/real.svg"
  fi
fi

echo "-- bad input: exit status 2, one line naming what was wrong, nothing written"
printf 'not json {' >"$TMP/bad.json"
echo '{"version": 3, "config": {}}' >"$TMP/noresults.json"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); del d["results"][1]["out_of_place"]["bus_bw"]; json.dump(d, open(sys.argv[2], "w"))' \
  "$TMP/shm.json" "$TMP/nobusbw.json"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); d["version"]=2; json.dump(d, open(sys.argv[2], "w"))' \
  "$LC" "$TMP/lc2.json"
refused() { # expected-text args...
  local want=$1 out rc
  shift
  rm -f "$TMP/out.png"
  out=$("$PLOT" "$@" -o "$TMP/out.png" 2>&1)
  rc=$?
  [[ $rc -eq 2 ]] || fail "rcoll-plot $*: exit status $rc, expected 2"
  [[ $(wc -l <<<"$out") -eq 1 && $out == *"$want"* ]] ||
    fail "rcoll-plot $*: expected one line with '$want', got: $out"
  [[ ! -e $TMP/out.png ]] || fail "rcoll-plot $*: wrote a plot from bad input"
}
refused "$TMP/missing.json: cannot read: No such file or directory" "$TMP/missing.json"
refused "$TMP/bad.json: not JSON" "$TMP/bad.json"
refused "$TMP/noresults.json: wrong schema: neither a bench -J file" "$TMP/noresults.json"
refused "$TMP/nobusbw.json: wrong schema: results[1].out_of_place: 'bus_bw'" "$TMP/nobusbw.json"
refused "$TMP/lc2.json: wrong schema: rcoll_linkcheck version 2" "$TMP/lc2.json"
refused "a link check is plotted alone" "$TMP/shm.json" "$LC"
refused "--limit 'fast'" "$TMP/shm.json" --limit fast
refused "2 --label for 1 file" "$TMP/shm.json" --label a --label b
out=$("$PLOT" "$TMP/shm.json" -o "$TMP/out.jpeg" 2>&1)
[[ $? -eq 2 && $out == *"the extension must be one of .png, .svg, .pdf"* ]] ||
  fail "a .jpeg output was not refused: $out"

echo "-- without matplotlib: exit status 3 and how to install it (make demo skips its plot on 3)"
mkdir -p "$TMP/nompl/matplotlib"
echo 'raise ImportError("hidden by tests/check_plot.sh")' >"$TMP/nompl/matplotlib/__init__.py"
out=$(PYTHONPATH=$TMP/nompl "$PLOT" "$TMP/shm.json" -o "$TMP/nompl.png" 2>&1)
[[ $? -eq 3 && $out == *"apt-get install python3-matplotlib"* && ! -e $TMP/nompl.png ]] ||
  fail "without matplotlib: expected exit status 3 and the install hint, got: $out"

exit $failed
