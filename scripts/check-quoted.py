#!/usr/bin/env python3
"""check-quoted.py — every figure a benchmark summary quotes is in the table it cites.

The figures flow one way (docs/BENCHMARKS.md, "How the figures flow"): a benchmark writes JSON
lines to bench/out/; its script prints tables from them (bench/summarise.py prints the
headline figures again from the same files); the tables are copied into docs/BENCHMARKS.md;
the summaries in README.md and docs/BENCHMARKS.md quote the tables. This script checks the
last step, so that a rerun that changes a table cannot leave an old figure in a summary.

THE CONVENTION. A summary names the tables it quotes in a marker on the line before it:

    <!-- quotes: "Training in one process" -->
    <!-- quotes: "Data parallelism", "The GPT against PyTorch" -->

A name is a heading of docs/BENCHMARKS.md, its text up to the first " (" or the whole text,
and must match exactly one of the headings whose section holds a table. The section's
tables are its table rows (lines starting with "|") up to the next heading of the same or a
higher level, subsections included. The marker covers the lines after it up to the first
blank line, heading or next marker: one paragraph or one list. Markers may stand in
README.md and docs/*.md; the tables are always docs/BENCHMARKS.md's. In README.md every
figure outside tables and code must be under a marker: one that no table holds (a
measurement made once and reported in prose) stands under `<!-- quotes: none: WHERE -->`,
WHERE naming the prose that reports it, which the check takes as written.

WHAT COUNTS AS A FIGURE, in a marked block, outside `code`:
  1. a number with a unit right after it: × (no space: "3.25×"; "2 × 2" is a product), %,
     samples/s, tokens/s, GFLOP/s, GB/s, MB, MiB or ms. Numbers joined by "-", "/", ",",
     "→", "against", "and", "or" or "to" share the unit after the last: both ends of
     "1.20-1.78×", all three of "4, 16, 64 MiB", both of "24,071 against 20,999 samples/s";
  2. the N of a fraction 1/N ("1/15 of its memory");
  3. a decimal with two or more digits after the point, with or without a unit ("0.94
     efficiency", "−0.39 points").
Not figures: integers without a unit (years, counts, "2 threads", "batch 64", "5 runs");
numbers inside words or code (fc1, H200, `--batch 64`, commit hashes); dotted versions
(4.1.4); PyTorch's versions (the decimals after "PyTorch": "PyTorch 1.13 and 2.15"; a decimal
used as a name: "1.13's"); thresholds: a number, or a chain of them, right after "at least",
"at most", "within", "target", "≥", "≤", "below" or "above" (then perhaps ":", "of" or
"the"), a target rather than a measurement.

MATCHING. Signs and thousands commas are ignored ("−0.39" quotes a cell's "-0.39"). A figure
written with d digits after the point matches a number t of a cited table when |t − figure|
≤ ½·10^−d: the quote may be the cell rounded (3.254 quoted as 3.25; 14.7 as the 15 of
"1/15"; 1.78 as 1.8), never a number derived from cells: a ratio of two cells must be a cell
itself, or the summary quotes the two cells.

Exits 1 naming each figure that no cited table holds, as
    README.md:112: "4.5×" not in table "Training in one process" (docs/BENCHMARKS.md:179)
(the line of the section's first table row), each README figure without a marker, and each
marker that names no section or an ambiguous one, or whose block quotes no figure.
`--show` lists every marked block's figures and the table number each matched. Standard
library only: any python3 runs it.
"""
import collections
import glob
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
TABLES = os.path.join("docs", "BENCHMARKS.md")

MARKER = re.compile(r"^\s*<!--\s*quotes:(.*?)-->\s*$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*$")
# A number not inside a word or a dotted version: no letter, digit, "_" or "." before it, no
# letter or ".digit" after it; "1/" before it makes it a fraction's N.
TOKEN = re.compile(r"(?P<frac>(?<![\w.])1/)?(?<![\w.])(?P<whole>\d{1,3}(?:,\d{3})+|\d+)"
                   r"(?:\.(?P<dec>\d+))?(?![A-Za-z_]|\.\d)")
# A unit right after a number: × without a space ("2 × 2" is a product, "64×784" a shape).
UNIT = re.compile(r"×(?!\d)|%|\s?(?:samples/s|tokens/s|GFLOP/s|GB/s|MiB|MB|ms)(?![A-Za-z])")
# What joins the numbers of one quantity: "1.20-1.78×", "4, 16, 64 MiB", "172 / 148 MB",
# "24,071 against 20,999 samples/s", "1.5 and 2 ms": the unit after the last is theirs.
JOIN = re.compile(r"\s*(?:[-–/,→]|against|and|or|to)\s*")
NONE = re.compile(r"^none\b.*\S.*\S")  # "none: why", for a figure no table holds
THRESHOLD = re.compile(r"(?:at least|at most|within|target|≥|≤|below|above)"
                       r"\s*(?::|of|the)?\s*$")
VERSION_AFTER = re.compile(r"PyTorch(?:es)?\s+(?:\d+\.\d+(?:,\s*|\s+and\s+|\s+or\s+))*$")


def rel(path):
    return os.path.relpath(path, ROOT)


def sections(path):
    """[(name, full heading, heading line, [(line number, table row)])] of a markdown file."""
    lines = open(path, encoding="utf-8").read().splitlines()
    heads = []  # (index, level, text)
    fence = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else HEADING.match(line)
        if m:
            heads.append((i, len(m.group(1)), m.group(2)))
    out = []
    for k, (i, level, text) in enumerate(heads):
        end = next((j for j, lv, _ in heads[k + 1:] if lv <= level), len(lines))
        rows = [(j + 1, lines[j]) for j in range(i + 1, end) if lines[j].startswith("|")]
        out.append((text.split(" (", 1)[0], text, i + 1, rows))
    return out


def table_numbers(rows):
    """Every number in the rows' cells (signs and thousands commas dropped), as floats."""
    nums = []
    for _, row in rows:
        for m in re.finditer(r"(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?", row):
            nums.append(float(m.group(0).replace(",", "")))
    return nums


Token = collections.namedtuple("Token", "m unit skip threshold")


def figures(text):
    """The quoted figures of a text (a block's lines joined, so that a threshold word or a
    join may end one line and its number start the next): [(as written, value, digits
    after the point, offset in the text)]."""
    plain = re.sub(r"`[^`]*`", lambda m: " " * len(m.group(0)), text)
    toks = []
    for m in TOKEN.finditer(plain):
        before = plain[:m.start()]
        u = UNIT.match(plain, m.end())
        version = m.group("dec") is not None and "," not in m.group("whole") and (
            bool(VERSION_AFTER.search(before)) or plain[m.end():m.end() + 2] == "'s")
        toks.append(Token(m, u.group(0) if u else None, version,
                          bool(THRESHOLD.search(before))))
    # Chains of joined numbers share the unit written after the last; a version ends a
    # chain; a chain that starts after a threshold word is a target as a whole.
    chains, cur = [], []
    for t in toks:
        joined = cur and cur[-1].unit is None and \
            JOIN.fullmatch(plain[cur[-1].m.end():t.m.start()])
        if t.skip or not joined:
            if cur:
                chains.append(cur)
            cur = []
        if not t.skip:
            cur.append(t)
    if cur:
        chains.append(cur)
    out = []
    for chain in chains:
        if chain[0].threshold:
            continue
        unit = chain[-1].unit
        for t in chain:
            dec = t.m.group("dec")
            if not (unit or t.m.group("frac") or (dec is not None and len(dec) >= 2)):
                continue
            shown = ("1/" if t.m.group("frac") else "") + t.m.group(0).split("/")[-1]
            if unit:
                shown += unit if unit[0] in "×%" else " " + unit.strip()
            out.append((shown, float(t.m.group("whole").replace(",", "") + "." + (dec or "0")),
                        len(dec) if dec else 0, t.m.start()))
    return out


def matches(value, decimals, nums):
    """The table numbers the figure may quote, the nearest first."""
    half = 0.5 * 10 ** -decimals + 1e-9
    return sorted((t for t in nums if abs(t - value) <= half), key=lambda t: abs(t - value))


def marked_blocks(path):
    """[(marker line, [names], [(line number, text)])] of one file's markers."""
    lines = open(path, encoding="utf-8").read().splitlines()
    out = []
    fence = False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else MARKER.match(line)
        if not m:
            continue
        names = re.findall(r'"([^"]+)"', m.group(1))
        block = []
        for j in range(i + 1, len(lines)):
            if not lines[j].strip() or HEADING.match(lines[j]) or MARKER.match(lines[j]):
                break
            block.append((j + 1, lines[j]))
        out.append((i + 1, names, block, m.group(1).strip()))
    return out


def unmarked(path):
    """README.md's figures outside every marked block (tables and code aside): each one an
    error, so that a figure added to the README without a marker cannot pass."""
    lines = open(path, encoding="utf-8").read().splitlines()
    covered = {ln for _, _, block, _ in marked_blocks(path) for ln, _ in block}
    runs, fence = [], False  # runs of consecutive lines outside blocks, code and tables
    for i, line in enumerate(lines, 1):
        if line.startswith("```"):
            fence = not fence
        if fence or not line.strip() or line.startswith(("|", "```")) or i in covered or \
                MARKER.match(line):
            runs.append([])
        elif runs and runs[-1]:
            runs[-1].append((i, line))
        else:
            runs.append([(i, line)])
    out = []
    for run in (r for r in runs if r):
        text = "\n".join(t for _, t in run)
        for shown, _, _, at in figures(text):
            out.append('%s:%d: "%s" is quoted without a marker: put <!-- quotes: "Section" --> '
                       'on the line before its paragraph' % (rel(path), run[0][0] +
                                                            text.count("\n", 0, at), shown))
    return out


def main(argv):
    show = "--show" in argv
    secs = sections(os.path.join(ROOT, TABLES))
    files = [os.path.join(ROOT, "README.md")] + sorted(
        glob.glob(os.path.join(ROOT, "docs", "*.md")))
    errors, nblocks, nfigs = [], 0, 0
    for path in files:
        for line, names, block, raw in marked_blocks(path):
            where = "%s:%d" % (rel(path), line)
            if NONE.match(raw):
                continue
            if not names:
                errors.append('%s: marker names no section: write <!-- quotes: "Section" -->, '
                              'not <!-- quotes: %s -->' % (where, raw))
                continue
            cited, ok = [], True
            for name in names:
                hits = [s for s in secs if (s[0] == name or s[1] == name) and s[3]]
                if len(hits) != 1:
                    ok = False
                    errors.append("%s: section \"%s\" %s in %s" % (
                        where, name, "matches no heading of a section with a table"
                        if not hits else "is ambiguous (headings at lines %s)" %
                        ", ".join(str(s[2]) for s in hits), TABLES))
                else:
                    cited.append(hits[0])
            if not ok:
                continue
            nums = [n for s in cited for n in table_numbers(s[3])]
            label = ", ".join('"%s" (%s:%d)' % (s[0], TABLES, s[3][0][0]) for s in cited)
            label = ("table " if len(cited) == 1 else "tables ") + label
            nblocks += 1
            found = 0
            if show:
                print("%s: quotes %s" % (where, label))
            text = "\n".join(t for _, t in block)
            for shown, value, dec, at in figures(text):
                ln = line + 1 + text.count("\n", 0, at)
                found += 1
                hit = matches(value, dec, nums)
                if show:
                    print("  %s:%d  %-10s %s" % (rel(path), ln, shown,
                                                 "= %g" % hit[0] if hit else "NOT FOUND"))
                if not hit:
                    errors.append('%s:%d: "%s" not in %s' % (rel(path), ln, shown, label))
            nfigs += found
            if not found:
                errors.append("%s: the block after this marker quotes no figure (a stale "
                              "marker?)" % where)
    errors += unmarked(os.path.join(ROOT, "README.md"))
    for e in errors:
        print(e)
    if errors:
        print("check-quoted: %d error(s); the rule for what counts and how it matches is at "
              "the top of scripts/check-quoted.py" % len(errors))
        return 1
    print("check-quoted: %d figures in %d marked summaries, each in the table it cites" %
          (nfigs, nblocks))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
