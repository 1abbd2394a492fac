#!/bin/sh
# deb-fresh.sh DEB|DIR — the .deb on a fresh Debian 12: debootstrap makes a minimal bookworm
# system (--variant=minbase) in a scratch directory, apt installs the package there with the
# dependencies it declares, fetched from this machine's Debian mirror, and the installed
# dtrain runs inside it (chroot): --version, --help, the man page, the packaged linreg
# example on one rank and under mpirun on two. Then, with the packages the .deb suggests for
# building against it (and a C compiler), tests/install/consumer builds with pkg-config
# and runs in one process and under mpirun.
# Needs root, debootstrap (installed when missing) and the network to a Debian mirror:
# `make package-fresh` runs it; `make test` does not (two to four minutes, ~500 MB).
set -u
arg=${1:?usage: deb-fresh.sh DEB|DIR}
. "$(dirname "$0")/deb_of.sh"
deb=$(deb_of "$arg")
[ -n "$deb" ] && [ -f "$deb" ] || { echo "deb-fresh: no dtrain_*.deb in $arg (make package)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "deb-fresh: needs root (debootstrap, chroot)"; exit 1; }
mirror=${DEB_MIRROR:-http://deb.debian.org/debian}
if ! command -v debootstrap >/dev/null 2>&1; then
    apt-get install -y debootstrap >/dev/null 2>&1 ||
        { apt-get update >/dev/null 2>&1 && apt-get install -y debootstrap >/dev/null 2>&1; } ||
        { echo "deb-fresh: cannot install debootstrap"; exit 1; }
fi
root=$(mktemp -d "${TMPDIR:-/var/tmp}/dtrain-bookworm-XXXXXX") || exit 1
cleanup() {
    for m in dev/shm dev/pts dev sys proc; do umount "$root/$m" 2>/dev/null; done
    rm -rf "$root"
}
trap cleanup EXIT
fail=0
echo "deb-fresh: debootstrap bookworm (minbase) from $mirror into $root"
debootstrap --variant=minbase bookworm "$root" "$mirror" >"$root.log" 2>&1 ||
    { echo "deb-fresh: debootstrap failed:"; tail -20 "$root.log"; rm -f "$root.log"; exit 1; }
rm -f "$root.log"
mount -t proc proc "$root/proc" && mount -t sysfs sysfs "$root/sys" && mount --bind /dev "$root/dev" &&
    mount -t devpts devpts "$root/dev/pts" && mount -t tmpfs tmpfs "$root/dev/shm" ||
    { echo "deb-fresh: cannot mount /proc, /sys and /dev in the new system"; exit 1; }
cp "$deb" "$root/tmp/"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 \
    DEBIAN_FRONTEND=noninteractive "$@"; }
# check NAME COMMAND...: runs it in the new system; its output is shown when it fails.
check() {
    name=$1
    shift
    if in_root "$@" >"$root/tmp/out" 2>&1; then
        echo "ok $name: $(head -n 1 "$root/tmp/out" | cut -c1-120)"
    else
        echo "FAIL $name (exit $?):"; sed 's/^/    /' "$root/tmp/out" | tail -25; fail=1
    fi
}
before=$(in_root dpkg-query -W -f='.\n' | wc -l)
check apt_update apt-get update
check install apt-get install -y --no-install-recommends "/tmp/$(basename "$deb")"
after=$(in_root dpkg-query -W -f='.\n' | wc -l)
echo "   packages: $before in the fresh system, $after after installing dtrain"
check version dtrain --version
check help dtrain --help
check man_page sh -c 'ls /usr/share/man/man1/dtrain.1* && test -s /usr/share/man/man1/dtrain.1*'
check train_1_rank sh -c 'dtrain train /usr/share/doc/dtrain/examples/linreg.ini --max-steps 20 \
    --threads 1 --no-progress 2>&1 | tail -n 3'
check train_2_ranks sh -c 'mpirun -np 2 --oversubscribe dtrain train \
    /usr/share/doc/dtrain/examples/linreg.ini --max-steps 20 --threads 1 --no-progress 2>&1 |
    grep "2 ranks"'
suggests=$(dpkg-deb -f "$deb" Suggests | tr -d ',')
check install_suggested apt-get install -y --no-install-recommends gcc libc6-dev make $suggests
mkdir -p "$root/tmp/consumer"
cp "$(dirname "$0")/consumer/main.c" "$(dirname "$0")/consumer/Makefile" "$root/tmp/consumer/"
check pkg_config sh -c 'pkg-config --modversion dtrain && pkg-config --cflags --libs dtrain'
check consumer_build make -C /tmp/consumer consumer
check consumer_run /tmp/consumer/consumer
check consumer_mpi sh -c 'mpirun -np 2 --oversubscribe /tmp/consumer/consumer --mpi | grep "ranks 2"'
if [ $fail -eq 0 ]; then echo "deb-fresh: all checks passed"; else echo "deb-fresh: FAILED"; fi
exit $fail
