#!/usr/bin/env python3
"""svg_ticks.py SVG [METRICS] — the tick labels of `dtrain plot`'s line charts, read back
from the SVG (each <g class="chart">, its <text class="tick x|tick y">), must be what a
person reads at a glance:

- numbers, large ones with a unit: 95k, 1.2M (no label of five or more digits);
- no label twice on an axis, and at least three on a linear axis;
- round values: on a linear axis evenly spaced by a step of 1, 2 or 5 x 10^k, each tick a
  multiple of it; on a logarithmic axis powers of ten;
- counts (an axis of optimizer steps or epochs) on whole numbers; accuracy inside [0, 1];
- with the metrics file the SVG was drawn from: every value of each chart inside its axes.

Prints one line per chart and axis; exits 1 naming the chart, the axis, what was expected
and the labels it found. Standard library only."""
import json
import math
import re
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
UNITS = {"": 1.0, "k": 1e3, "M": 1e6, "G": 1e9}
LABEL = re.compile(r"^(-?)(\d+)(\.\d+)?([kMG]?)$")
bad = 0


def fail(where, what, labels):
    global bad
    bad += 1
    print("FAIL %s: %s; the labels: %s" % (where, what, " ".join(labels)))


def value(label):
    m = LABEL.match(label)
    if m is None:
        return None, None
    return float(m.group(1) + m.group(2) + (m.group(3) or "")) * UNITS[m.group(4)], m


def round_step(step):
    """step snapped to 1, 2 or 5 x 10^k when it is one (labels carry a few digits: a
    difference of two of them is that within rounding), else None."""
    k = math.floor(math.log10(step) + 1e-9)
    m = step / 10 ** k
    for r in (1, 2, 5, 10):
        if abs(m - r) < 1e-6 * r:
            return r * 10 ** k
    return None


def check_axis(where, labels, log, whole, fraction, data):
    values = []
    for lab in labels:
        v, m = value(lab)
        if v is None:
            fail(where, "label '%s' is not a number with an optional k/M/G" % lab, labels)
            return
        if len(m.group(2)) >= 5:
            fail(where, "label '%s' has %d digits: expected a k/M/G unit" %
                 (lab, len(m.group(2))), labels)
        values.append(v)
    if len(set(labels)) != len(labels):
        fail(where, "a label repeats", labels)
    if len(labels) < (2 if log else 3):
        fail(where, "%d ticks, expected at least %d" % (len(labels), 2 if log else 3), labels)
        return
    if values != sorted(values):
        fail(where, "the ticks are not in increasing order", labels)
    if log:
        for v in values:
            k = math.log10(v) if v > 0 else float("nan")
            if not abs(k - round(k)) < 1e-9:
                fail(where, "%g is not a power of ten" % v, labels)
    else:
        step = values[1] - values[0]
        if step <= 0 or round_step(step) is None:
            fail(where, "the step %g is not 1, 2 or 5 x 10^k" % step, labels)
        else:
            step = round_step(step)
            for a, b in zip(values, values[1:]):
                if abs((b - a) - step) > 1e-6 * step:
                    fail(where, "ticks %g and %g are not %g apart" % (a, b, step), labels)
            for v in values:
                q = v / step
                if abs(q - round(q)) > 1e-6 * max(1.0, abs(q)):
                    fail(where, "%g is not a multiple of the step %g" % (v, step), labels)
    if whole and any(v != math.floor(v) for v in values):
        fail(where, "a count's ticks must be whole numbers", labels)
    if fraction and (values[0] < 0 or values[-1] > 1):
        fail(where, "an accuracy axis must stay inside [0, 1]", labels)
    data = [d for d in data if d is not None and math.isfinite(d) and (not log or d > 0)]
    if data and not log and (min(data) < values[0] - 1e-9 * abs(values[0]) or
                             max(data) > values[-1] + 1e-9 * abs(values[-1])):
        fail(where, "the data [%g, %g] is outside the ticks [%g, %g]" %
             (min(data), max(data), values[0], values[-1]), labels)
    print("ok %s: %s" % (where, " ".join(labels)))


def metrics_data(path):
    """Each chart's (x values, y values), as cmd_plot.c reads the metrics file."""
    steps, epochs = [], []
    for line in open(path):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        if o.get("event") == "step":
            steps.append(o)
        elif o.get("event") == "epoch":
            epochs.append(o)
    return {
        "Loss": ([o["step"] for o in steps] + [o["steps"] for o in epochs],
                 [o["loss"] for o in steps] + [o["train_loss"] for o in epochs] +
                 [o["test_loss"] for o in epochs]),
        "Test accuracy": ([o["steps"] for o in epochs], [o["test_accuracy"] for o in epochs]),
        "Throughput": ([o["epoch"] for o in epochs], [o["samples_per_s"] for o in epochs]),
    }


def main():
    svg = sys.argv[1]
    data = metrics_data(sys.argv[2]) if len(sys.argv) > 2 else {}
    charts = [g for g in ET.parse(svg).getroot().iter(NS + "g") if g.get("class") == "chart"]
    if not charts:
        fail(svg, "no <g class=\"chart\">", [])
    for g in charts:
        texts = {}
        for t in g.iter(NS + "text"):
            texts.setdefault(t.get("class"), []).append(t.text or "")
        title = (texts.get("title") or ["?"])[0]
        xlabel = (texts.get("label x") or [""])[0]
        ylabel = (texts.get("label y") or [""])[0]
        xs, ys = data.get(title, ([], []))
        # bench-comm's charts are logarithmic on both axes (cmd_plot.c).
        log = "bytes" in xlabel
        check_axis("%s: %s, x (%s)" % (svg.split("/")[-1], title, xlabel),
                   texts.get("tick x", []), log, xlabel in ("optimizer step", "epoch"), 0, xs)
        check_axis("%s: %s, y (%s)" % (svg.split("/")[-1], title, ylabel),
                   texts.get("tick y", []), log, 0, ylabel == "accuracy", ys)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
