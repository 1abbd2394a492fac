#!/bin/sh
# hydra.sh — MPICH's mpiexec (Hydra) for the tests, which pass Open MPI's options: it drops
# --oversubscribe (Hydra oversubscribes without asking) and turns -x VAR into -genvlist VAR
# (Hydra passes the environment; the list names what must reach every rank) and -x VAR=VALUE
# into -genv VAR VALUE.
# `make test-mpich` configures it as the tests' launcher (MPIEXEC_BIN).
set -u
n=$#
i=0
while [ "$i" -lt "$n" ]; do
    a=$1
    shift
    i=$((i + 1))
    case $a in
    --oversubscribe) ;;
    -x)
        v=$1
        shift
        i=$((i + 1))
        case $v in
        *=*) set -- "$@" -genv "${v%%=*}" "${v#*=}" ;;
        *) set -- "$@" -genvlist "$v" ;;
        esac
        ;;
    *) set -- "$@" "$a" ;;
    esac
done
exec "${DT_MPIEXEC_MPICH:-mpiexec.mpich}" "$@"
