# Helpers shared by compare_tcp.sh and compare_shm.sh (sourced by both).
# They rely on the caller's CHECK (bench -c value), WARMUP/ITERS overrides and
# the associative arrays TIME and BUSBW indexed "tool,size".

note() { printf '# %s\n' "$*"; }

# "1M" -> 1048576 (binary multiples, optional trailing B).
to_bytes() {
  local t=${1^^}; t=${t%B}
  local n=${t%[KMG]} mult=1
  case $t in *K) mult=1024 ;; *M) mult=$((1 << 20)) ;; *G) mult=$((1 << 30)) ;; esac
  [[ $n =~ ^[0-9]+$ ]] || { echo "bad size '$1'" >&2; exit 2; }
  echo $((n * mult))
}

warmup_for() { local w=$(( $1 / 10 )); [ "$w" -lt 2 ] && w=2; echo "${WARMUP:-$w}"; }

lo_bytes() { awk '$1 == "lo:" { print $2 }' /proc/net/dev; }

# bench/allreduce_perf's nccl-tests table: size count type redop root
# time algbw busbw #wrong (out-of-place), then the same for in-place.
# The out-of-place time is the one compared (the references are out of
# place too); #wrong counts both halves.
parse_nccl_table() {
  awk -v s="$1" '$1 == s && $3 == "float" {
      w = $9; if ($13 != "N/A" && $13 + 0 > 0) w = $13
      print $6, $8, w; exit }' "$2"
}
# gloo_allreduce.py and mpi_allreduce: bytes count time_us algbw busbw #wrong.
parse_ref_table() {
  awk -v s="$1" '$1 == s { print $3, $5, $6; exit }' "$2"
}

rcoll_args() {
  echo "-b $1 -e $1 -f 2 -n $2 -w $3 -c $CHECK -d float -o sum"
}

# The median of a space-separated list of numbers ("" when it is empty):
# the comparisons keep each tool's median over alternating rounds.
median_of() {
  tr ' ' '\n' <<<"$1" | awk 'NF' | sort -g | awk '{ v[NR] = $1 } END {
    if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

val() { echo "${BUSBW[$1,$2]:-n/a}"; }
# busbw of tool $1 over busbw of tool $2 at size $3, taken from the times so
# that it is exact even where busbw rounds to 0.000 (8 B).
ratio() {
  awk -v a="${TIME[$1,$3]:-}" -v b="${TIME[$2,$3]:-}" \
    'BEGIN { if (a+0 > 0 && b+0 > 0) printf "%.2f", b / a; else print "n/a" }'
}

# Keeps tool $1's best time $3 (us) at size $2, and its busbw by one formula
# for every tool, with 3 decimals (the tables agree with each tool's own
# busbw column up to its rounding).
record_best() {
  TIME[$1,$2]=$3
  BUSBW[$1,$2]=$(awk -v s="$2" -v t="$3" -v n="$NRANKS" \
    'BEGIN { printf "%.3f", s / (t * 1e3) * 2 * (n - 1) / n }')
}
