# deb_of.sh — sourced by check-deb.sh and deb-fresh.sh: `deb_of ARG` prints the package ARG
# names: ARG itself, or the newest dtrain_*.deb in the directory ARG (empty when none).
deb_of() {
    if [ -d "$1" ]; then
        # shellcheck disable=SC2012
        ls -t "$1"/dtrain_*.deb 2>/dev/null | head -n 1
    else
        echo "$1"
    fi
}
