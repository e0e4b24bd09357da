#!/usr/bin/env bash
# Lists the public C functions that a header declares with a given name
# prefix, one name a line, sorted: every top-level declaration of the form
#   <return type> [*]<prefix><Upper>...(
# such as "ncclResult_t  ncclAllReduce(" or "const char* ncclGetErrorString(".
# Calls inside comments and macros are not declarations and are skipped.
#
#   scripts/api-functions.sh HEADER PREFIX     e.g. /usr/include/nccl.h nccl
#
# tests/check_nccl_header.sh uses it on nccl.h (prefix nccl, so pnccl* is
# left out by the prefix itself) and on include/rcoll.h (prefix rcoll), and
# it produced tests/data/nccl-2.28.9-functions.txt.
set -euo pipefail
[[ $# -eq 2 ]] || { echo "usage: $0 HEADER PREFIX" >&2; exit 2; }
header=$1 prefix=$2
[[ -r $header ]] || { echo "$0: cannot read $header" >&2; exit 1; }
# Drop /* ... */ and // comments first (a comment may mention "ncclFoo("),
# then keep the lines that start a declaration: optional export macro or
# qualifiers, a return type, then the name and its opening parenthesis.
sed -e 's://.*$::' "$header" |
  awk 'BEGIN { c = 0 }
       { line = $0; out = "";
         while (length(line) > 0) {
           if (c) { i = index(line, "*/"); if (!i) { line = ""; break } line = substr(line, i + 2); c = 0 }
           else { i = index(line, "/*"); if (!i) { out = out line; line = ""; break }
                  out = out substr(line, 1, i - 1); line = substr(line, i + 2); c = 1 } }
         print out }' |
  grep -E "^[[:space:]]*([A-Z_]+[[:space:]]+)*(const[[:space:]]+)?[A-Za-z_][A-Za-z0-9_]*[[:space:]*]+${prefix}[A-Z][A-Za-z0-9_]*[[:space:]]*\(" |
  grep -Ev '^[[:space:]]*#' |
  sed -E "s/^.*[[:space:]*](${prefix}[A-Z][A-Za-z0-9_]*)[[:space:]]*\(.*$/\1/" |
  sort -u
