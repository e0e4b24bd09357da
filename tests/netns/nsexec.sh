#!/bin/bash
# Stands in for ssh when MPICH's hydra launches its proxies on "hosts" that
# are network namespaces: `nsexec.sh [ssh options] HOST COMMAND...` runs
# COMMAND in the namespace that owns HOST's address (RCOLL_NETNS_HOSTS maps
# addresses to namespaces; see netns.sh).
while [[ $1 == -* ]]; do
  [[ $1 == -[oplis] ]] && shift # options that take a value
  shift
done
host=$1
shift
ns=$(awk -v h="$host" '$1 == h {print $2}' "${RCOLL_NETNS_HOSTS:?}")
[[ -n $ns ]] || { echo "nsexec.sh: no namespace owns $host" >&2; exit 255; }
exec ip netns exec "$ns" sh -c "$*"
