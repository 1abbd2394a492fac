#!/bin/sh
# install.sh BUILD CMAKE CC VERSION — an installed dtrain is usable from outside the tree:
#   1. `cmake --install BUILD --prefix P` into a scratch prefix puts the tool, the shared
#      (SONAME libdtrain.so.1) and static libraries, every public header, dtrain.pc, the
#      CMake package config and the man page in place, with no path of the build or source
#      tree left in them, and each installed header compiles on its own from P alone;
#   2. tests/install/consumer builds against P with pkg-config (shared, and static with
#      --static) and with find_package(dtrain) (dtrain::dtrain, dtrain::dtrain_static),
#      -Wall -Wextra -Wpedantic -Werror; all four train and print the same losses, the loss
#      falls, and the shared ones load P's libdtrain.so.1; one runs on 2 MPI ranks (--mpi);
#   3. P/bin/dtrain trains an installed example, and `dtrain --help` and every command's
#      --help exit 0 on stdout alone, each option they list is in the man page under its
#      command and each option the page gives a command is in its --help, the page names
#      this version and renders without warnings (man, groff; each skipped if absent).
# The Debian package is checked by tests/install/check-deb.sh (make package).
# The lists read with $(...) below are single words by construction (file names, options).
# shellcheck disable=SC2013
set -u
build=$1 cmake=$2 cc=$3 version=$4
src=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-install-XXXXXX") || exit 1
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
# step NAME CMD...: runs CMD with its output in $tmp/NAME.log; prints the log on failure.
step() {
    name=$1
    shift
    "$@" >"$tmp/$name.log" 2>&1
    code=$?
    if [ $code -eq 0 ]; then
        ok "$name"
        return 0
    fi
    bad "$name" "exit status 0 from: $*" "exit status $code with this output:"
    sed 's/^/    /' "$tmp/$name.log"
    return 1
}

prefix=$tmp/prefix
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
[ -n "$libdir" ] || libdir=lib
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
step install "$cmake" --install "$build" --prefix "$prefix" || exit 1

# ---- 1. the files ---------------------------------------------------------------------
missing=""
for f in "$prefix/bin/dtrain" "$libdir/libdtrain.so" "$libdir/libdtrain.so.1" \
    "$libdir/libdtrain.a" "$libdir/pkgconfig/dtrain.pc" "$libdir/cmake/dtrain/dtrainConfig.cmake" \
    "$libdir/cmake/dtrain/dtrainConfigVersion.cmake" "$prefix/share/man/man1/dtrain.1" \
    "$prefix/share/doc/dtrain/examples/linreg.ini"; do
    [ -e "$f" ] || missing="$missing ${f#"$prefix"/}"
done
verdict files "every file in place" "missing:$missing" [ -z "$missing" ]
(cd "$src/include/dtrain" && ls ./*.h) >"$tmp/headers.src"
(cd "$prefix/include/dtrain" 2>/dev/null && ls ./*.h) >"$tmp/headers.inst"
if cmp -s "$tmp/headers.src" "$tmp/headers.inst"; then
    ok "headers ($(wc -l <"$tmp/headers.src"))"
else
    bad headers "include/dtrain/*.h installed" "$(diff "$tmp/headers.src" "$tmp/headers.inst" | grep '^[<>]' | tr '\n' ' ')"
fi
if command -v readelf >/dev/null 2>&1; then
    soname=$(readelf -d "$libdir/libdtrain.so" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
    verdict soname libdtrain.so.1 "'$soname'" [ "$soname" = libdtrain.so.1 ]
fi
# A path into the build or source tree in the package files or a run path would make the
# installation work on this machine only. (Assertion messages name source files: harmless.)
leaks=$(grep -rlF -e "$build" -e "$src" "$libdir/pkgconfig" "$libdir/cmake" 2>/dev/null |
    sed "s|$prefix/||" | tr '\n' ' ')
if command -v readelf >/dev/null 2>&1; then
    for f in "$libdir/libdtrain.so" "$prefix/bin/dtrain"; do
        readelf -d "$f" | grep -E '\((RUNPATH|RPATH)\)' | grep -qF -e "$build" -e "$src" &&
            leaks="$leaks ${f#"$prefix"/}(run path)"
    done
fi
verdict no_tree_paths "no build or source path" "in $leaks" [ -z "$leaks" ]

export PKG_CONFIG_PATH="$libdir/pkgconfig"
pc_prefix=$(pkg-config --variable=prefix dtrain 2>&1)
verdict pc_prefix "$prefix" "'$pc_prefix'" [ "$pc_prefix" = "$prefix" ]
pc_version=$(pkg-config --modversion dtrain 2>&1)
verdict pc_version "$version" "'$pc_version'" [ "$pc_version" = "$version" ]
cflags=$(pkg-config --cflags dtrain)
hfail=""
for h in $(cat "$tmp/headers.inst"); do
    h=${h#./}
    # shellcheck disable=SC2086
    printf '#include <dtrain/%s>\n' "$h" |
        "$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror -fsyntax-only $cflags -x c - \
            >"$tmp/h.err" 2>&1 || { hfail="$hfail $h"; sed 's/^/    /' "$tmp/h.err"; }
done
verdict installed_headers_alone "each header compiles with pkg-config --cflags dtrain" \
    "failing:$hfail" [ -z "$hfail" ]

# ---- 2. the consumer, both ways ---------------------------------------------------------
werror="-O2 -Wall -Wextra -Wpedantic -Werror"
cp -R "$src/tests/install/consumer" "$tmp/pc"
step consumer_pkgconfig make -C "$tmp/pc" consumer consumer_static CC="$cc" CFLAGS="$werror"
step consumer_cmake_configure "$cmake" -S "$src/tests/install/consumer" -B "$tmp/cm" \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_C_FLAGS="$werror" &&
    step consumer_cmake_build "$cmake" --build "$tmp/cm"
found=$(sed -n 's/^dtrain_DIR:PATH=//p' "$tmp/cm/CMakeCache.txt" 2>/dev/null)
verdict find_package_dir "$libdir/cmake/dtrain" "'$found'" [ "$found" = "$libdir/cmake/dtrain" ]

export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
first=""
for exe in pc/consumer pc/consumer_static cm/consumer cm/consumer_static; do
    name=run_$(echo "$exe" | tr / _)
    [ -x "$tmp/$exe" ] || { bad "$name" "$exe built" "no such program"; continue; }
    step "$name" "$tmp/$exe" || continue
    out=$(cat "$tmp/$name.log")
    # "ranks 1: test loss before B after A" with A < B
    if ! echo "$out" | awk '$1 == "ranks" && $2 == "1:" && $8 + 0 < $6 + 0 { found = 1 }
                            END { exit !found }'; then
        bad "$name.loss" "'ranks 1: test loss before B after A' with A < B" "'$out'"
    elif [ -z "$first" ]; then
        first=$out
    elif [ "$out" != "$first" ]; then
        bad "$name.same" "'$first' (pc/consumer's)" "'$out'"
    fi
done
if command -v ldd >/dev/null 2>&1; then
    for exe in pc/consumer cm/consumer; do
        got=$(ldd "$tmp/$exe" 2>&1 | awk '$1 == "libdtrain.so.1" { print $3 }')
        verdict "loads_installed_lib $exe" "$libdir/libdtrain.so.1" "'$got'" \
            [ "$got" = "$libdir/libdtrain.so.1" ]
    done
    for exe in pc/consumer_static cm/consumer_static; do
        got=$(ldd "$tmp/$exe" 2>&1 | grep libdtrain)
        verdict "static $exe" "no libdtrain.so loaded" "'$got'" [ -z "$got" ]
    done
fi
if [ -n "${MPIRUN:-}" ] && [ -x "$tmp/cm/consumer" ]; then
    if step consumer_mpi_np2 "$MPIRUN" -np 2 --oversubscribe "$tmp/cm/consumer" --mpi; then
        grep -q '^ranks 2: test loss before' "$tmp/consumer_mpi_np2.log" ||
            bad consumer_mpi_np2.output "'ranks 2: test loss before ...'" \
                "'$(cat "$tmp/consumer_mpi_np2.log")'"
    fi
else
    echo "skip consumer_mpi_np2: MPIRUN is not set (ctest sets it)"
fi

# ---- 3. the installed tool, its help and the man page -----------------------------------
dtrain=$prefix/bin/dtrain
step installed_train "$dtrain" train "$prefix/share/doc/dtrain/examples/linreg.ini" \
    --max-steps 20 --threads 1 --no-progress
man=$prefix/share/man/man1/dtrain.1
# The page's text with troff's \- as -, for finding options in it.
sed 's/\\-/-/g' "$man" >"$tmp/man.src"
th=$(grep '^\.TH' "$tmp/man.src")
verdict man_version "a .TH line naming \"dtrain $version\"" "'$th'" \
    grep -q "^\.TH DTRAIN 1 .*\"dtrain $version\"" "$tmp/man.src"
# help NAME ARGS...: dtrain ARGS into $tmp/NAME.out: exit 0, nothing on stderr, no "(null)".
help() {
    name=$1
    shift
    "$dtrain" "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    code=$?
    if [ $code -ne 0 ] || [ -s "$tmp/$name.err" ] || [ ! -s "$tmp/$name.out" ] ||
        grep -q '(null)' "$tmp/$name.out"; then
        bad "help_$name" "exit 0, help on stdout alone" \
            "exit $code, $(wc -l <"$tmp/$name.out") lines out, stderr: $(head -c 200 "$tmp/$name.err")"
        return 1
    fi
    ok "help_$name"
}
help top --help
commands=$(sed -n '/^commands:/,/^$/s/^  \([a-z][-a-z]*\) .*/\1/p' "$tmp/top.out")
[ -n "$commands" ] || bad commands "commands listed by dtrain --help" "none"
for c in $commands; do
    help "$c" "$c" --help || continue
    # The page's subsection for command c: from its .SS line to the next .SS or .SH.
    awk -v c="dtrain $c" '/^\.S[SH]/ { ins = /^\.SS/ && (index($0, c " ") || index($0, c "\"")) }
                          ins' "$tmp/man.src" >"$tmp/man.$c"
    if [ ! -s "$tmp/man.$c" ]; then
        bad "man_$c" "a .SS subsection for 'dtrain $c' in dtrain.1" "none"
        continue
    fi
    undocumented=""
    for opt in $(sed -n 's/^  \(-[-a-zA-Z0-9]*\).*/\1/p' "$tmp/$c.out"); do
        grep -Eq -- "(^|[^-a-zA-Z0-9])$opt([^-a-zA-Z0-9]|\$)" "$tmp/man.$c" ||
            undocumented="$undocumented $opt"
    done
    verdict "man_$c" "every option of 'dtrain $c --help' in dtrain.1" "missing:$undocumented" \
        [ -z "$undocumented" ]
    # And the other way: each option the page gives the command (a .TP item) is in its help.
    stale=""
    for opt in $(sed -n 's/^\.B[IR]* *\(-[-a-zA-Z0-9]*\).*/\1/p' "$tmp/man.$c"); do
        case $opt in -h | --help) continue ;; esac
        grep -Eq -- "(^|[^-a-zA-Z0-9])$opt([^-a-zA-Z0-9]|\$)" "$tmp/$c.out" || stale="$stale $opt"
    done
    verdict "man_${c}_current" "dtrain.1's options of '$c' in its --help" "not there:$stale" \
        [ -z "$stale" ]
done
# Each command the page describes is one dtrain has.
for c in $(sed -n 's/^\.SS "[^"]*dtrain \([a-z][-a-z]*\).*/\1/p' "$tmp/man.src"); do
    echo "$commands" | grep -qx -- "$c" || bad man_commands "only dtrain's commands" "'dtrain $c'"
done
if command -v man >/dev/null 2>&1; then
    MANWIDTH=80 man -l "$man" >"$tmp/man.txt" 2>"$tmp/man.err"
    code=$?
    if [ $code -ne 0 ] || [ -s "$tmp/man.err" ] || ! grep -q 'DTRAIN(1)' "$tmp/man.txt"; then
        bad man_renders "man -l: exit 0, DTRAIN(1), no warnings" \
            "exit $code: $(head -c 300 "$tmp/man.err")"
    else
        ok man_renders
    fi
else
    echo "skip man_renders: no man here"
fi
if command -v groff >/dev/null 2>&1; then
    groff -man -Tutf8 -ww -z "$man" >"$tmp/groff.err" 2>&1
    verdict groff_warnings "no warnings from groff -ww" "$(head -c 300 "$tmp/groff.err")" \
        [ ! -s "$tmp/groff.err" ]
else
    echo "skip groff_warnings: no groff here"
fi

if [ $fail -eq 0 ]; then echo "install: all checks passed"; else echo "install: FAILED"; fi
exit $fail
