#!/bin/sh
# check-deb.sh DEB|DIR — the Debian package that `make package` built (DIR: the newest
# dtrain_*.deb in it) is whole, without installing it on this machine:
#   1. Depends names the runtime packages (libopenmpi3, openmpi-bin, libopenblas0, zlib1g,
#      libinih1, libcjson1, libc6), and the files are there: the tool, libdtrain.so.1 with
#      its SONAME link, libdtrain.a, the headers, dtrain.pc (prefix /usr), the CMake package
#      config, the man page;
#   2. unpacked into a scratch directory (dpkg-deb -x), its dtrain runs with
#      LD_LIBRARY_PATH there: --help, and a few steps of the installed linreg example;
#   3. where apt has package lists, apt-get resolves its dependencies on a system with
#      nothing installed (a simulation against an empty dpkg status: a fresh Debian).
set -u
arg=${1:?usage: check-deb.sh DEB|DIR}
. "$(dirname "$0")/deb_of.sh"
deb=$(deb_of "$arg")
if [ -z "$deb" ] || [ ! -f "$deb" ]; then
    echo "FAIL deb: expected a dtrain_*.deb, got none at $arg"
    exit 1
fi
case $deb in /*) ;; *) deb=$(pwd)/$deb ;; esac
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-deb-XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok $1"; }
bad() {
    echo "FAIL $1: expected $2, got $3"
    fail=1
}
# verdict NAME EXPECTED GOT CMD...: ok NAME when CMD succeeds, else FAIL NAME.
verdict() {
    v_name=$1 v_expected=$2 v_got=$3
    shift 3
    if "$@"; then ok "$v_name"; else bad "$v_name" "$v_expected" "$v_got"; fi
}
echo "checking $deb"

# ---- 1. control fields and contents -------------------------------------------------------
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
# Depends as one package name a line (alternatives and versions dropped).
echo "$depends" | tr ',|' '\n' | sed 's/^ *//; s/ .*//' >"$tmp/depends"
for p in libc6 libopenmpi3 openmpi-bin libopenblas0 zlib1g libinih1 libcjson1; do
    verdict "depends $p" "$p in Depends" "'$depends'" grep -qx "$p" "$tmp/depends"
done
dpkg-deb -c "$deb" | awk '{ print $6 }' | sed 's|^\./||' >"$tmp/files"
for re in 'usr/bin/dtrain' 'usr/lib/([^/]+/)?libdtrain\.so\.1' 'usr/lib/([^/]+/)?libdtrain\.so' \
    'usr/lib/([^/]+/)?libdtrain\.a' 'usr/include/dtrain/dtrain\.h' 'usr/include/dtrain/comm_mpi\.h' \
    'usr/lib/([^/]+/)?pkgconfig/dtrain\.pc' 'usr/lib/([^/]+/)?cmake/dtrain/dtrainConfig\.cmake' \
    'usr/lib/([^/]+/)?cmake/dtrain/dtrainTargets\.cmake' 'usr/share/man/man1/dtrain\.1(\.gz)?'; do
    verdict "file $re" "a file matching it" none grep -Eqx "$re" "$tmp/files"
done

# ---- 2. unpacked, it runs --------------------------------------------------------------------
x=$tmp/root
dpkg-deb -x "$deb" "$x" || { bad unpack "dpkg-deb -x to succeed" "exit $?"; exit 1; }
lib=$(dirname "$(find "$x/usr/lib" -name 'libdtrain.so.1' | head -n 1)")
pc=$(find "$x/usr/lib" -name dtrain.pc | head -n 1)
verdict pc_prefix prefix=/usr "$(grep '^prefix=' "$pc")" grep -qx 'prefix=/usr' "$pc"
export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"$x/usr/bin/dtrain" --help >"$tmp/help" 2>&1
code=$?
verdict run_help "'usage: dtrain ...', exit 0" "exit $code: $(head -c 300 "$tmp/help")" \
    grep -q '^usage: dtrain' "$tmp/help"
[ $code -eq 0 ] || bad run_help_status 0 $code
if OPENBLAS_NUM_THREADS=1 "$x/usr/bin/dtrain" train "$x/usr/share/doc/dtrain/examples/linreg.ini" \
    --max-steps 10 --threads 1 --no-progress >"$tmp/train" 2>&1; then
    ok run_train
else
    bad run_train "exit 0" "exit $? with:"
    sed 's/^/    /' "$tmp/train"
fi

# ---- 3. the dependencies resolve on a fresh system ------------------------------------------
if command -v apt-get >/dev/null 2>&1 && ls /var/lib/apt/lists/*_Packages* >/dev/null 2>&1; then
    : >"$tmp/empty-status"
    if apt-get -s -o Dir::State::status="$tmp/empty-status" install "$deb" >"$tmp/apt" 2>&1; then
        ok "resolves_on_empty_system ($(grep -c '^Inst ' "$tmp/apt") packages)"
    else
        bad resolves_on_empty_system "apt-get -s to succeed" "exit $?:"
        grep -E '^(E|W):|Depends|broken' "$tmp/apt" | sed 's/^/    /'
    fi
else
    echo "skip resolves_on_empty_system: no apt-get or no package lists (apt-get update)"
fi

if [ $fail -eq 0 ]; then echo "check-deb: all checks passed"; else echo "check-deb: FAILED"; fi
exit $fail
