#!/usr/bin/env bash
# pin_rank.sh CMD ARGS...: runs CMD on core (rank mod cores), the rank from
# MPICH's PMI_RANK. Namespaces share one kernel, so hydra's own -bind-to
# core, which each "node" applies from core 0, would put every rank on core
# 0; this spreads them as Open MPI binds by default (one rank per core).
set -u
cores=$(nproc)
exec taskset -c $((${PMI_RANK:?pin_rank.sh: PMI_RANK is not set (launch with mpiexec.mpich)} % cores)) "$@"
