#!/usr/bin/env bash
# The layers of docs/architecture.md, enforced: every #include "..." in
# include/, lib/ (lib/cuda/ too), transports/, plugin/ and algorithms/ is
# resolved the way the compiler does (the including file's directory, then
# -Iinclude, then -Ilib) and must point to a layer that the including file's
# layer may see. An #include <...> that -Iinclude or -Ilib would find (such
# as <comm.h>) is checked the same way; the others are system headers. Each include that crosses the wrong way is printed with its
# file, line and the rule it breaks; the exit status is 1 when there is one,
# 0 when there is none, 77 (skip) when the sources are not found.
#
# The layers, lowest first (a file may include its own layer and those that
# its line lists):
#   layer       files                             may also include
#   public      include/                          nothing of the library
#   base        lib/ utilities, listed in BASE    public
#   plan        lib/ schedule types and the       public, base
#               tuner's model, in PLAN
#   transport   transports/<name>/                public, base
#   plugin      plugin/                           public, base
#   algorithms  algorithms/                       public, base, plan
#   core        every other file of lib/          public, base, plan
#   cuda        lib/cuda/                         public, base, plan, core
# One exception: lib/net.c, the table of transports (base, because the plugin
# uses it), includes each transports/<name>/<name>.h, never a private header;
# the core and the plugin see a transport only through net.h's ops table.
# Nothing of these includes tests/, bench/ or examples/. The core reaches
# lib/cuda through lib/device.h's ops table, never by including lib/cuda/.
#
# Both lists name files of lib/. A new utility that transports or the plugin
# need goes in BASE once it includes nothing above base; a new header that
# algorithms need goes in PLAN once it includes only base and plan. lib/plan.c
# is core, not plan: it binds plans to a communicator (comm.h).
set -uo pipefail

BASE="clock.c clock.h config.c config_env.c config.h error.c error.h hwtopo.c hwtopo.h log.c log.h
      copy_out.c copy_out.h hello_pending.c hello_pending.h net.c net.h pidns.c pidns.h pool.c pool.h reduce.c reduce.h
      reduce_math.h
      sockutil.c sockutil.h"
PLAN="algo.c algo.h plan.h topo.c topo.h tree.c tree.h tune_cost.c tune_cost.h tuner.h"
# The headers of each list, on one line, for messages.
BASE_H=$(for f in $BASE; do [[ $f == *.h ]] && echo "$f"; done | tr '\n' ' ' | sed 's/ $//')
PLAN_H=$(for f in $PLAN; do [[ $f == *.h ]] && echo "$f"; done | tr '\n' ' ' | sed 's/ $//')

ROOT=${RCOLL_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" 2>/dev/null || { echo "check_layers: cannot enter $ROOT; skipped"; exit 77; }
if [[ ! -d lib || ! -d include ]]; then
  echo "check_layers: no lib/ and include/ under $ROOT (set RCOLL_ROOT to the source tree); skipped"
  exit 77
fi

in_list() { # word, list (words apart by blanks or newlines)
  local w
  for w in $2; do
    [[ $w == "$1" ]] && return 0
  done
  return 1
}

# The layer of a path relative to the root; transports carry their name
# (transport:socket) so that two transports are two layers.
layer_of() {
  local p=$1
  case $p in
    include/*) echo public ;;
    lib/cuda/*) echo cuda ;;
    lib/*/*) echo core ;;
    lib/*)
      if in_list "${p#lib/}" "$BASE"; then echo base
      elif in_list "${p#lib/}" "$PLAN"; then echo plan
      else echo core
      fi ;;
    transports/*/*) p=${p#transports/}; echo "transport:${p%%/*}" ;;
    plugin/*) echo plugin ;;
    algorithms/*) echo algorithms ;;
    tests/* | bench/* | examples/*) echo "${p%%/*}" ;;
    *) echo outside ;;
  esac
}

# The layers a layer may include besides itself, and the rule in words.
allowed_for() {
  case $1 in
    public) echo "" ;;
    base) echo "public" ;;
    plan) echo "public base" ;;
    transport:*) echo "public base" ;;
    plugin) echo "public base" ;;
    algorithms) echo "public base plan" ;;
    core) echo "public base plan" ;;
    cuda) echo "public base plan core" ;;
  esac
}

rule_for() {
  case $1 in
    public) echo "include/ is the public ABI and includes nothing of the library" ;;
    base) echo "base utilities ($BASE_H) include only each other and include/" ;;
    plan) echo "plan headers ($PLAN_H) include only each other, base utilities and include/" ;;
    transport:*) echo "a transport sees lib's base utilities ($BASE_H) and its own directory: no core, no algorithms, no other transport" ;;
    plugin) echo "the plugin sees lib's base utilities ($BASE_H) and plugin/; it reaches transports through net.h" ;;
    algorithms) echo "algorithms see the plan headers ($PLAN_H) and base utilities: no core, no transports" ;;
    core) echo "the core sees a transport only through net.h (lib/net.c's table alone includes transports/<name>/<name>.h) and lib/cuda only through device.h" ;;
    cuda) echo "lib/cuda sees lib/ and itself: no transports, plugin or algorithms" ;;
  esac
}

# Where the compiler finds an include: for a quoted one the includer's
# directory, then (for both kinds) the -I directories in the Makefile's order.
# Prints the path relative to the root, or nothing.
resolve() { # includer, q (quoted) or a (angle brackets), name
  local dir cand dirs="include lib"
  [[ $2 == q ]] && dirs="$(dirname "$1") $dirs"
  for dir in $dirs; do
    if [[ -f $dir/$3 ]]; then
      realpath -m --relative-to=. "$dir/$3"
      return
    fi
  done
}

# Whether `from` (a file) may include `to` (a file).
may_include() { # from, from_layer, to, to_layer
  local from=$1 fl=$2 to=$3 tl=$4
  [[ $tl == "$fl" ]] && return 0
  in_list "$tl" "$(allowed_for "$fl")" && return 0
  # The transport table: lib/net.c lists each transport's public header.
  if [[ $from == lib/net.c && $tl == transport:* ]]; then
    local name=${tl#transport:}
    [[ $to == "transports/$name/$name.h" ]] && return 0
  fi
  return 1
}

violations=0
nincludes=0
while IFS= read -r file; do
  fl=$(layer_of "$file")
  # line number, kind (q or a) and name of each #include of the file
  while IFS=: read -r line kind name; do
    [[ -z $name ]] && continue
    to=$(resolve "$file" "$kind" "$name")
    [[ $kind == a && -z $to ]] && continue # a system header
    nincludes=$((nincludes + 1))
    if [[ $kind == a ]]; then inc="<$name>"; else inc="\"$name\""; fi
    if [[ -z $to ]]; then
      echo "$file:$line: #include $inc: not found in $(dirname "$file")/, include/ or lib/, so no layer can be checked (a generated header? give it a place in tests/check_layers.sh)"
      violations=$((violations + 1))
      continue
    fi
    tl=$(layer_of "$to")
    if ! may_include "$file" "$fl" "$to" "$tl"; then
      rule=$(rule_for "$fl")
      [[ $file == lib/net.c ]] && rule="$rule; lib/net.c may also include each transports/<name>/<name>.h, no private header"
      echo "$file:$line: #include $inc ($to, layer $tl) from layer $fl: $rule"
      violations=$((violations + 1))
    fi
  done < <(awk 'match($0, /^[ \t]*#[ \t]*include[ \t]*["<][^">]*[">]/) {
                 s = substr($0, RSTART, RLENGTH); sub(/^[^"<]*/, "", s)
                 kind = substr(s, 1, 1) == "<" ? "a" : "q"
                 print FNR ":" kind ":" substr(s, 2, length(s) - 2) }' "$file")
done < <(find include lib transports plugin algorithms -type f \
           \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) 2>/dev/null | sort)

if [[ $violations -gt 0 ]]; then
  echo "check_layers: $violations include(s) cross a layer the wrong way or cannot be placed (docs/architecture.md); FAILED"
  exit 1
fi
echo "check_layers: $nincludes includes checked, every one follows the layers: OK"
exit 0
