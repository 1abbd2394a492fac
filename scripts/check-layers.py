#!/usr/bin/env python3
"""check-layers.py — the include graph against the layer table of docs/ARCHITECTURE.md.

The table (section "Layers of the code") lists the layers bottom up; each row's "where"
cell names its directories (`src/core`) and public headers (`core.h`, or
`include/dtrain/core.h`). Every file under src/ and include/dtrain/ belongs to exactly one
layer, and a file may include only headers of its own layer or of layers below it. Exits 1
naming each include that points up (file:line, its layer, the header's layer), or a file
or header that no row claims. Standard library only: any python3 runs it.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def read_table():
    text = open(os.path.join(ROOT, "docs", "ARCHITECTURE.md"), encoding="utf-8").read()
    sec = text.split("## Layers of the code", 1)[1].split("\n## ", 1)[0]
    layers = []  # (name, [src dirs], [header basenames])
    for line in sec.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 3 or cells[0] in ("layer", "") or set(cells[0]) <= set("-"):
            continue
        names = re.findall(r"`([^`]+)`", cells[1])
        dirs = [n.rstrip("/") for n in names if n.startswith("src/")]
        heads = [os.path.basename(n) for n in names if n.endswith(".h")]
        layers.append((cells[0], dirs, heads))
    return layers


def main():
    layers = read_table()
    if not layers:
        print("check-layers: no layer table found in docs/ARCHITECTURE.md")
        return 1
    level = {}
    for i, (name, dirs, heads) in enumerate(layers):
        for d in dirs:
            level[d] = (i, name)
        for h in heads:
            level["include/dtrain/" + h] = (i, name)
    errors = []

    def layer_of(rel):
        if rel in level:
            return level[rel]
        d = os.path.dirname(rel)
        return level.get(d)

    files = []
    for top in ("src", "include/dtrain"):
        for dirpath, _, names in os.walk(os.path.join(ROOT, top)):
            for n in sorted(names):
                if n.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(dirpath, n), ROOT))
    for rel in sorted(files):
        mine = layer_of(rel)
        if mine is None:
            errors.append("%s: no row of the layer table claims this file" % rel)
            continue
        for lineno, line in enumerate(open(os.path.join(ROOT, rel), encoding="utf-8"), 1):
            m = re.match(r'\s*#\s*include\s+"([^"]+)"', line)
            if not m:
                continue
            inc = m.group(1)
            if inc.startswith("dtrain/"):
                target = "include/" + inc
            elif "/" in inc:
                target = "src/" + inc
            else:  # a header beside the file
                target = os.path.join(os.path.dirname(rel), inc)
            theirs = layer_of(target)
            if theirs is None:
                errors.append("%s:%d: includes %s, which no row of the layer table claims"
                              % (rel, lineno, inc))
            elif theirs[0] > mine[0]:
                errors.append("%s:%d: %s (layer %s) includes %s (layer %s, above it)"
                              % (rel, lineno, rel, mine[1], inc, theirs[1]))
    for e in errors:
        print("check-layers: " + e)
    if errors:
        return 1
    print("check-layers: %d files, %d layers, no include points up" % (len(files), len(layers)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
