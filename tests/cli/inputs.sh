# inputs.sh — shell functions (POSIX sh) that write small binary inputs for the CLI
# tests: IDX files and safetensors files, well-formed or deliberately not. Sourced by
# reject.sh; nothing here runs on its own.
# shellcheck shell=sh
# The printf formats below are built on purpose: octal escapes are how POSIX printf
# writes arbitrary bytes.
# shellcheck disable=SC2059

# byte N: writes one byte of value N (0..255).
byte() {
    printf "\\$(printf '%03o' "$1")"
}

# be32 N: writes N as a 4-byte big-endian integer (IDX headers are big-endian).
be32() {
    byte $((($1 >> 24) & 255))
    byte $((($1 >> 16) & 255))
    byte $((($1 >> 8) & 255))
    byte $(($1 & 255))
}

# le64 N: writes N (below 2^31) as an 8-byte little-endian integer (the safetensors
# header length).
le64() {
    byte $(($1 & 255))
    byte $((($1 >> 8) & 255))
    byte $((($1 >> 16) & 255))
    byte $((($1 >> 24) & 255))
    printf '\000\000\000\000'
}

# idx_labels FILE MAGIC COUNT "L0 L1 ...": a label file whose header says COUNT labels,
# followed by the listed label bytes (as many as given, whatever COUNT says).
idx_labels() {
    {
        be32 "$2"
        be32 "$3"
        for l in $4; do byte "$l"; done
    } >"$1"
}

# idx_images FILE MAGIC COUNT ROWS COLS NBYTES: an image file whose header says COUNT
# images of ROWS x COLS, followed by NBYTES pixel bytes (a repeating ramp 0..255), so a
# short or long NBYTES makes a truncated file or one with trailing bytes.
idx_images() {
    {
        be32 "$2"
        be32 "$3"
        be32 "$4"
        be32 "$5"
        # od-free ramp: 256 bytes 0..255 repeated, cut to NBYTES.
        i=0
        ramp=""
        while [ $i -lt 256 ]; do
            ramp="$ramp\\$(printf '%03o' $i)"
            i=$((i + 1))
        done
        n=$(($6 / 256 + 1))
        while [ $n -gt 0 ]; do
            printf "$ramp"
            n=$((n - 1))
        done | head -c "$6"
    } >"$1"
}

# st_file FILE DATA_BYTES JSON: a safetensors file with header JSON (its length in the
# first 8 bytes, little-endian) and a data region of DATA_BYTES zero bytes.
st_file() {
    {
        le64 ${#3}
        printf '%s' "$3"
        head -c "$2" /dev/zero
    } >"$1"
}
