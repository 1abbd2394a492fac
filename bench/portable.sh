#!/bin/sh
# portable.sh [BUILD_DIR] [OUT_DIR] — the benchmarks as one tarball for another x86-64 Linux
# machine that has neither Debian's packages nor a network: a many-core node to measure
# 4-16 ranks on (docs/BENCHMARKS.md, "On a machine without the packages").
#
# The tarball (OUT_DIR/dtrain-bench-COMMIT.tar.xz, default OUT_DIR bench/out/portable) holds
#   bin/       BUILD_DIR's programs as built here (portable unless DT_NATIVE was on: the
#              kernels pick the CPU's instructions at run time, and OpenBLAS its own)
#   build/     a wrapper of the same name for each, which puts lib/ first on the library
#              path and runs the program: the bench scripts take `build` as BUILD_DIR, and
#              only dtrain's processes see lib/ (not the PyTorch peer's)
#   lib/       the libraries they link that a machine without these packages may lack,
#              copied from this machine: OpenBLAS (the version the tables name) and its
#              Fortran runtime, libinih, cJSON, protobuf-c. Not glibc, libgcc_s or zlib,
#              which every such machine has, and not MPI: the target's Open MPI 4.1 or
#              newer (libmpi.so.40, mpirun) runs the ranks
#   data/      Fashion-MNIST and the fortunes text, which setup.sh puts where the configs
#              read them (/usr/share/datasets/fashion-mnist, /usr/share/games/fortunes)
#   bench/, examples/   the scripts and configs of this working tree; VERSION says which
#              commit, and whether the tree had changes
#   setup.sh   run there first: checks that every program finds its libraries and MPI, puts
#              the data in place, and trains two steps on 2 ranks
# Its size is printed (about 45 MB: the data is most of it).
set -eu

build=${1:-build}
out=${2:-bench/out/portable}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
progs="dtrain bench_train bench_tp sgemm_peak attn_bench"
for p in $progs; do
    if [ ! -x "$build/$p" ]; then
        echo "portable.sh: $build/$p is missing: run \`make\` first (BUILD_DIR $build)" >&2
        exit 1
    fi
done
for d in /usr/share/datasets/fashion-mnist /usr/share/games/fortunes; do
    if [ ! -d "$d" ]; then
        echo "portable.sh: $d is missing: run scripts/install-deps.sh first" >&2
        exit 1
    fi
done

commit=$(git rev-parse --short HEAD)
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
top="$stage/dtrain-bench"
mkdir -p "$top/bin" "$top/build" "$top/lib" "$top/data/datasets" "$top/data/games"

for p in $progs; do
    cp "$build/$p" "$top/bin/$p"
    cat >"$top/build/$p" <<EOF
#!/bin/sh
# bench/portable.sh's wrapper: dtrain's $p with the libraries it was built against
here=\$(cd "\$(dirname "\$0")/.." && pwd)
LD_LIBRARY_PATH="\$here/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "\$here/bin/$p" "\$@"
EOF
    chmod +x "$top/build/$p"
done

# Every library the programs resolve here, less the ones the target brings: glibc's, the
# compiler's runtime, zlib, and MPI with what it loads (hwloc, libevent, udev). The
# Fortran runtime comes along because OpenBLAS needs it.
for p in $progs; do ldd "$build/$p"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    while read -r lib; do
        case $(basename "$lib") in
        libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | ld-linux* | libgcc_s.so* | \
            libz.so* | libstdc++.so* | libmpi* | libopen-rte* | libopen-pal* | libhwloc* | \
            libevent* | libudev* | libpmix* | libprrte* | libucp* | libucs* | libfabric*)
            ;;
        *) cp -L "$lib" "$top/lib/" ;;
        esac
    done

cp -r /usr/share/datasets/fashion-mnist "$top/data/datasets/"
cp -r /usr/share/games/fortunes "$top/data/games/"
git ls-files bench examples | tar -cf - -T - | tar -xf - -C "$top"
dirty=""
git diff --quiet HEAD -- 2>/dev/null || dirty=" with uncommitted changes"
printf 'dtrain commit %s%s, built %s on %s (%s)\n' "$commit" "$dirty" \
    "$(date -u +%Y-%m-%dT%H:%MZ)" "$(uname -n)" "$(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)" \
    >"$top/VERSION"

cat >"$top/setup.sh" <<'EOF'
#!/bin/sh
# setup.sh — run once on the machine the tarball was copied to (bench/portable.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cat "$here/VERSION"
bad=0
for p in "$here"/bin/*; do
    missing=$(LD_LIBRARY_PATH="$here/lib" ldd "$p" | awk '/not found/ { print $1 }' | tr '\n' ' ')
    if [ -n "$missing" ]; then
        echo "setup.sh: $(basename "$p") cannot find: $missing" >&2
        bad=1
    fi
done
if ! command -v mpirun >/dev/null 2>&1; then
    echo "setup.sh: no mpirun on PATH: install Open MPI 4.1 or newer (libmpi.so.40)" >&2
    bad=1
fi
[ "$bad" = 0 ] || exit 1
mpirun --version 2>/dev/null | head -1
for pair in datasets/fashion-mnist games/fortunes; do
    dst="/usr/share/$pair"
    if [ ! -d "$dst" ]; then
        if ! mkdir -p "$(dirname "$dst")" 2>/dev/null || ! cp -r "$here/data/$pair" "$dst"; then
            echo "setup.sh: cannot write $dst, where the configs read their data: run me as" \
                "root, or copy $here/data/$pair there" >&2
            exit 1
        fi
        echo "setup.sh: data in $dst"
    fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
cd "$here"
mpirun --oversubscribe -np 2 build/dtrain train examples/mlp.ini --max-steps 2 --threads 1 \
    --no-progress --set train.eval=off | tail -1
echo "setup.sh: ready; e.g. BENCH_NO_INSTALL=1 BENCH_TORCH_PYTHON=python3 bench/gpt_layouts.sh build --quick"
EOF
chmod +x "$top/setup.sh"

mkdir -p "$out"
tarball="$out/dtrain-bench-$commit.tar.xz"
tar -cJf "$tarball" -C "$stage" dtrain-bench
echo "$tarball: $(du -m "$tarball" | cut -f1) MB; $(cat "$top/VERSION")"
echo "there: tar -xJf $(basename "$tarball") && sh dtrain-bench/setup.sh"
