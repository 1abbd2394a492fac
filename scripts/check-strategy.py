#!/usr/bin/env python3
"""check-strategy.py — the trainer and the CLI ask a strategy; they never test which one it is.

docs/ARCHITECTURE.md ("Adding a strategy"): a strategy is its file in src/parallel/ and its
row in the registry (src/parallel/registry.c); nothing in src/train or src/cli may branch on
which strategy runs. This check fails, naming file:line, on any of these there:

  - an include of a strategy's insides: parallel/strategy_impl.h or any parallel/ header
    but the trainer's interface (parallel/strategy.h) and the registry (parallel/registry.h).
    Without those headers struct dt_strategy and every strategy's own struct are incomplete
    types there, so the compiler refuses any read of a strategy-private field;
  - a strategy kind constant (DT_STRATEGY_DDP and the like, or dt_strategy_kind);
  - parallel.strategy compared with == or != (the registry's number of a strategy);
  - a strategy's name (every registry row's, and "single") as a string
    literal in a comparison: strcmp/strncmp/strcasecmp or ==;
  - in src/cli, the report's figures read other than generically: dt_train_comm_stats (its
    fields are the strategies' figures, one field per figure: a report that reads them
    prints each strategy its own way) or the name of a figure that a file of src/parallel
    describes (`.name = "ps_wait_s"`) as a string literal. The CLI prints every figure that
    dt_trainer_describe gives, whatever it is named (src/cli/train_figures.c).

The registry lookup by name (dt_strategy_find, dt_strategy_index, dt_strategy_name) is the
one allowed use of a name. Standard library only: any python3 runs it.
"""
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CHECKED = ("src/train", "src/cli")
ALLOWED_PARALLEL = {"parallel/strategy.h", "parallel/registry.h"}


def registry_names():
    """Every registry row's name: the rows are `const dt_strategy_def dt_X_def = {.name =
    "..."` in the strategies' files (src/parallel/registry.h)."""
    names = set()
    pdir = os.path.join(ROOT, "src/parallel")
    for f in sorted(os.listdir(pdir)):
        if f.endswith(".c"):
            text = open(os.path.join(pdir, f), encoding="utf-8").read()
            names.update(re.findall(r'const dt_strategy_def \w+ = \{\s*\.name = "([a-z_0-9]+)"',
                                    text))
    names.add("single")  # ddp's one-rank case, as dt_strategy_info names it
    return names


def figure_names():
    """The names of the figures src/parallel's files describe (dt_figure's .name)."""
    names = set()
    top = os.path.join(ROOT, "src/parallel")
    for f in sorted(os.listdir(top)):
        if f.endswith(".c"):
            text = open(os.path.join(top, f), encoding="utf-8").read()
            names |= set(re.findall(r'\.name\s*=\s*"([a-z_0-9]+)"', text))
            # The macro-built ones ("ps_stale_hist_" #b): their stem.
            names |= set(re.findall(r'"([a-z_0-9]+_)"\s*#', text))
    # The registry's rows name strategies, not figures.
    return names - registry_names()


def main():
    names = registry_names()
    figures = figure_names()
    # Whole literals: "ps_wait_s", and a stem's numbered names ("ps_stale_hist_3").
    fig_alt = "|".join(sorted(re.escape(n) + ("[0-9]+" if n.endswith("_") else "")
                              for n in figures))
    name_alt = "|".join(sorted(re.escape(n) for n in names))
    rules = [
        (re.compile(r'#\s*include\s+"(parallel/[^"]+)"'), None, "includes %s: a strategy's insides"),
        (re.compile(r"\bDT_STRATEGY_(?!SETTINGS_MAX\b|H\b)[A-Z_]+\b|\bdt_strategy_kind\b"), None,
         "tests a strategy kind (%s)"),
        (re.compile(r"parallel\.strategy\s*[!=]=|[!=]=\s*\w+(?:->|\.)parallel\.strategy\b"), None,
         "compares parallel.strategy (%s)"),
        (re.compile(r'\b(?:strn?cmp|strcasecmp)\s*\([^;]*"(%s)"' % name_alt), None,
         'compares a strategy\'s name ("%s")'),
        (re.compile(r'[!=]=\s*"(%s)"|"(%s)"\s*[!=]=' % (name_alt, name_alt)), None,
         'compares a strategy\'s name ("%s")'),
        (re.compile(r"\bdt_train(?:er)?_comm_stats\b"), "src/cli",
         "reads %s: print dt_trainer_describe's figures instead"),
        (re.compile(r'"(%s)"' % fig_alt), "src/cli",
         'names a strategy\'s figure ("%s"): print every figure alike'),
    ]
    errors = []
    nfiles = 0
    for top in CHECKED:
        for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
            for f in sorted(files):
                if not f.endswith((".c", ".h")):
                    continue
                nfiles += 1
                rel = os.path.relpath(os.path.join(dirpath, f), ROOT)
                text = open(os.path.join(dirpath, f), encoding="utf-8").read()
                # Comments say what they like; strings stay (they are what is compared).
                text = re.sub(r"/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group(0)), text,
                              flags=re.S)
                for lineno, line in enumerate(text.splitlines(), 1):
                    for rx, only, msg in rules:
                        if rx is None or (only is not None and not rel.startswith(only + "/")):
                            continue
                        for m in rx.finditer(line):
                            what = next((g for g in m.groups() if g), m.group(0)) \
                                if m.groups() else m.group(0)
                            if msg.startswith("includes") and what in ALLOWED_PARALLEL:
                                continue
                            errors.append("%s:%d: %s" % (rel, lineno, msg % what))
    for e in errors:
        print("check-strategy: " + e)
    if errors:
        print("check-strategy: ask the strategy (src/parallel/strategy.h) instead: "
              "docs/ARCHITECTURE.md, \"Adding a strategy\"")
        return 1
    print("check-strategy: %d files of %s, %d strategy names, %d figure names: no test of a "
          "strategy's kind, no figure of one read by name" % (nfiles, " and ".join(CHECKED),
                                                              len(names), len(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
