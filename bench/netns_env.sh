# netns_env.sh — sourced by bench/*_netns.sh once they have set `build` (the build directory)
# and `here` (bench/): the project's root, dtrain, the launcher and the environment their
# ranks run in (one BLAS thread each; Open MPI allowed to run as root, which namespaces need),
# and tests/net/hosts.sh, whose hosts_up, across and hosts_down they use.
root=$(dirname "$here")
DTRAIN=$build/dtrain
MPIRUN=${MPIRUN:-mpirun}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
. "$root/tests/net/hosts.sh"
