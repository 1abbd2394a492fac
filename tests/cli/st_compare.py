"""st_compare.py A B [--names N1,N2,...] [--atol X] — compares the tensors of two
safetensors files with nothing but the standard library: the same tensor names, dtypes and
shapes, and the same data bytes (with --atol, F32 values within X of each other instead:
the largest difference is printed per tensor). With --names, also checks that A holds
exactly those tensors, in that order of data offsets, as F32. Prints each tensor and exits
1 on the first difference.

Used by tests/cli/weights.sh; any python3 works (no torch, no numpy)."""
import json
import struct
import sys


def read(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        sys.exit(f"FAIL: {path}: {len(blob)} bytes, no header length")
    (hlen,) = struct.unpack("<Q", blob[:8])
    if 8 + hlen > len(blob):
        sys.exit(f"FAIL: {path}: header length {hlen} runs past the file")
    header = json.loads(blob[8 : 8 + hlen])
    data = blob[8 + hlen :]
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, e in header.items():
        begin, end = e["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            sys.exit(f"FAIL: {path}: tensor {name}: offsets [{begin}, {end}] outside the data")
        tensors[name] = (e["dtype"], tuple(e["shape"]), begin, data[begin:end])
    return meta, tensors


def main():
    args = sys.argv[1:]
    names = None
    if "--names" in args:
        i = args.index("--names")
        names = args[i + 1].split(",")
        del args[i : i + 2]
    atol = None
    if "--atol" in args:
        i = args.index("--atol")
        atol = float(args[i + 1])
        del args[i : i + 2]
    if len(args) != 2:
        sys.exit("usage: st_compare.py A B [--names N1,N2,...] [--atol X]")
    meta_a, a = read(args[0])
    meta_b, b = read(args[1])
    print(f"{args[0]}: metadata {meta_a}")
    print(f"{args[1]}: metadata {meta_b}")
    if names is not None:
        order = [n for n, _ in sorted(a.items(), key=lambda kv: kv[1][2])]
        if order != names:
            sys.exit(f"FAIL: {args[0]} holds {order}, expected {names}")
        for n in names:
            if a[n][0] != "F32":
                sys.exit(f"FAIL: {args[0]}: tensor {n} has dtype {a[n][0]}, expected F32")
    if sorted(a) != sorted(b):
        sys.exit(f"FAIL: tensor names differ: {sorted(a)} vs {sorted(b)}")
    for n in sorted(a):
        da, sa, _, xa = a[n]
        db, sb, _, xb = b[n]
        if (da, sa) != (db, sb):
            sys.exit(f"FAIL: tensor {n}: {da} {sa} vs {db} {sb}")
        if atol is not None and da == "F32":
            va = struct.unpack(f"<{len(xa) // 4}f", xa)
            vb = struct.unpack(f"<{len(xb) // 4}f", xb)
            worst = max((abs(p - q) for p, q in zip(va, vb)), default=0.0)
            first = next((i for i, (p, q) in enumerate(zip(va, vb)) if not abs(p - q) <= atol),
                         None)
            if first is not None:
                sys.exit(f"FAIL: tensor {n}: element {first}: {va[first]!r} vs {vb[first]!r}, "
                         f"beyond {atol}")
            print(f"  {n}: {da} {list(sa)}: max |a-b| {worst:.3g} <= {atol}")
            continue
        if xa != xb:
            size = {"F32": 4, "F64": 8}.get(da, 1)
            first = next(i for i in range(len(xa)) if xa[i] != xb[i]) // size
            sys.exit(f"FAIL: tensor {n}: data differs, first at element {first}")
        print(f"  {n}: {da} {list(sa)}: {len(xa)} bytes equal")


if __name__ == "__main__":
    main()
