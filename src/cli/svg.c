/* svg.c — line charts and stacked bars as SVG text (svg.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/svg.h"

/* Distinct colours that stay apart for the colour-blind (Okabe and Ito's palette). */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#F0E442", "#000000"};
#define NCOLORS ((int)(sizeof palette / sizeof palette[0]))

/* A <text> element; `cls` (or NULL) names what it is, for a reader of the file. */
static void text(FILE *f, double x, double y, const char *anchor, int size, const char *cls,
                 const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\"", x, y, anchor,
            size);
    if (cls != NULL)
        fprintf(f, " class=\"%s\"", cls);
    fputc('>', f);
    for (; *s; s++) /* the few characters XML reserves */
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else
            fputc(*s, f);
    fputs("</text>\n", f);
}

void dt_svg_begin(FILE *f, int width, int height)
{
    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            width, height, width, height);
}

void dt_svg_end(FILE *f)
{
    fputs("</svg>\n", f);
}

/* An axis: its ends (log10 of them on a logarithmic axis) and its ticks, which sit at
 * round values: multiples of a step of 1, 2 or 5 x 10^k on a linear axis (whose ends are
 * ticks), powers of ten on a logarithmic one. */
typedef struct axis {
    double lo, hi;
    int log;
    double step;  /* linear: between ticks; logarithmic: decades between ticks */
    double scale; /* linear: the labels' unit: 1, 1e3 (k), 1e6 (M) or 1e9 (G) */
    int decimals; /* linear: digits after the point, so that neighbouring ticks differ */
} axis;

static double tr(const axis *a, double v)
{
    return a->log ? log10(v) : v;
}

/* The smallest of 1, 2, 5 x 10^k at least `raw` (> 0). */
static double round_step(double raw)
{
    const double mag = pow(10.0, floor(log10(raw)));
    static const double m[] = {1, 2, 5, 10};
    for (int i = 0; i < 4; i++)
        if (m[i] * mag >= raw * (1 - 1e-9))
            return m[i] * mag;
    return 10 * mag;
}

/* Round ends and ticks for [lo, hi] (hi > lo) on a linear axis. */
static void linear_ticks(axis *a, const dt_svg_axis_opts *o)
{
    a->step = round_step((a->hi - a->lo) / 5);
    if (o->whole && a->step < 1)
        a->step = 1;
    a->lo = floor(a->lo / a->step + 1e-9) * a->step;
    a->hi = ceil(a->hi / a->step - 1e-9) * a->step;
    if (o->fraction) { /* a fraction's axis ends inside [0, 1] (steps divide 1) */
        a->lo = fmax(a->lo, 0.0);
        a->hi = fmin(a->hi, 1.0);
    }
    const double big = fmax(fabs(a->lo), fabs(a->hi));
    a->scale = big >= 1e9 ? 1e9 : big >= 1e6 ? 1e6 : big >= 1e4 ? 1e3 : 1;
    const int e = (int)floor(log10(a->step / a->scale) + 1e-9);
    a->decimals = e < 0 ? -e : 0;
}

/* The data's range on one axis (logarithmic: of the positive values), widened when flat,
 * then taken out to round ticks. */
static axis range(const dt_svg_chart *c, int is_y, int log)
{
    const dt_svg_axis_opts *o = is_y ? &c->y : &c->x;
    axis a = {INFINITY, -INFINITY, log, 1, 1, 0};
    for (int s = 0; s < c->nseries; s++)
        for (int i = 0; i < c->series[s].n; i++) {
            const double v = is_y ? c->series[s].y[i] : c->series[s].x[i];
            if (!isfinite(v) || (log && v <= 0))
                continue;
            a.lo = fmin(a.lo, tr(&a, v));
            a.hi = fmax(a.hi, tr(&a, v));
        }
    if (!(a.lo <= a.hi))
        a.lo = 0, a.hi = 1;
    if (log) { /* whole decades, every decade a tick up to 8, else every few */
        a.lo = floor(a.lo + 1e-9);
        a.hi = fmax(ceil(a.hi - 1e-9), a.lo + 1);
        a.step = ceil((a.hi - a.lo) / 8);
        return a;
    }
    if (a.hi - a.lo <= 1e-9 * fmax(1.0, fabs(a.hi))) {
        /* One value: a tenth of it either side (a count: at least 1), so that the ticks
         * around it are round numbers that differ. */
        const double v = a.lo, d = fmax(v != 0 ? 0.1 * fabs(v) : 1.0, o->whole ? 1.0 : 0.0);
        a.lo = v - d;
        a.hi = v + d;
    } else if (is_y) { /* room above and below the curves, not across zero */
        const double pad = 0.05 * (a.hi - a.lo);
        a.lo = a.lo >= 0 ? fmax(a.lo - pad, 0.0) : a.lo - pad;
        a.hi += pad;
    }
    if (o->fraction) {
        a.lo = fmax(a.lo, 0.0);
        a.hi = fmin(a.hi, 1.0);
    }
    linear_ticks(&a, o);
    return a;
}

/* A tick's label: in the axis' unit with its decimals (125k, 1.2M, 0.85); on a
 * logarithmic axis a power of ten in its own unit (100, 10k, 1M, 0.01). */
static void tick_label(const axis *a, double v, char *out, size_t n)
{
    if (a->log && v < 1) { /* 0.1, 0.01, ...: as many decimals as the power */
        snprintf(out, n, "%.*f", (int)-lround(log10(v)), v);
        return;
    }
    if (a->log) {
        const double big = fabs(v);
        const double scale = big >= 1e9 ? 1e9 : big >= 1e6 ? 1e6 : big >= 1e3 ? 1e3 : 1;
        snprintf(out, n, "%.10g%s", v / scale,
                 scale == 1e9   ? "G"
                 : scale == 1e6 ? "M"
                 : scale == 1e3 ? "k"
                                : "");
        return;
    }
    const char *unit = a->scale == 1e9 ? "G" : a->scale == 1e6 ? "M" : a->scale == 1e3 ? "k" : "";
    snprintf(out, n, "%.*f%s", a->decimals, v / a->scale, v == 0 ? "" : unit);
}

/* A grid line and a label at every tick. */
static void ticks(FILE *f, const axis *a, int is_y, double x, double y, double w, double h)
{
    const long first = lround(a->lo / a->step), last = lround(a->hi / a->step);
    for (long k = first; k <= last; k++) {
        const double t = (double)k * a->step, v = a->log ? pow(10.0, t) : t;
        const double at = (t - a->lo) / (a->hi - a->lo);
        if (at < -1e-9 || at > 1 + 1e-9)
            continue;
        char label[32];
        tick_label(a, v, label, sizeof label);
        if (is_y) {
            const double py = y + h - h * at;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    x, py, x + w, py);
            text(f, x - 6, py + 4, "end", 11, "tick y", label);
        } else {
            const double px = x + w * at;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    px, y, px, y + h);
            text(f, px, y + h + 16, "middle", 11, "tick x", label);
        }
    }
}

static void series(FILE *f, const dt_svg_series *s, const char *color, const axis *ax,
                   const axis *ay, double x, double y, double w, double h)
{
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"", color);
    for (int i = 0; i < s->n; i++) {
        if (!isfinite(s->x[i]) || !isfinite(s->y[i]) || (ax->log && s->x[i] <= 0) ||
            (ay->log && s->y[i] <= 0))
            continue;
        fprintf(f, "%.1f,%.1f ", x + w * (tr(ax, s->x[i]) - ax->lo) / (ax->hi - ax->lo),
                y + h - h * (tr(ay, s->y[i]) - ay->lo) / (ay->hi - ay->lo));
    }
    fputs("\"/>\n", f);
    for (int i = 0; s->points && i < s->n; i++)
        if (isfinite(s->x[i]) && isfinite(s->y[i]) && !(ax->log && s->x[i] <= 0) &&
            !(ay->log && s->y[i] <= 0))
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%s\"/>\n",
                    x + w * (tr(ax, s->x[i]) - ax->lo) / (ax->hi - ax->lo),
                    y + h - h * (tr(ay, s->y[i]) - ay->lo) / (ay->hi - ay->lo), color);
}

void dt_svg_line_chart(FILE *f, const dt_svg_chart *c, double x, double y, double w, double h)
{
    /* The plot area inside the box: room for the title, tick labels and the legend. */
    const double px = x + 70, py = y + 30, pw = w - 90 - 170, ph = h - 75;
    const axis ax = range(c, 0, c->logx), ay = range(c, 1, c->logy);
    fputs("<g class=\"chart\">\n", f);
    text(f, x + w / 2, y + 18, "middle", 14, "title", c->title);
    ticks(f, &ax, 0, px, py, pw, ph);
    ticks(f, &ay, 1, px, py, pw, ph);
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            px, py, pw, ph);
    text(f, px + pw / 2, py + ph + 34, "middle", 12, "label x", c->xlabel);
    fprintf(f, "<g transform=\"translate(%.1f,%.1f) rotate(-90)\">", x + 16, py + ph / 2);
    text(f, 0, 0, "middle", 12, "label y", c->ylabel);
    fputs("</g>\n", f);
    for (int s = 0; s < c->nseries; s++) {
        const char *color = palette[s % NCOLORS];
        series(f, &c->series[s], color, &ax, &ay, px, py, pw, ph);
        const double ly = py + 12 + 18 * s;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n",
                px + pw + 14, ly - 5, color);
        text(f, px + pw + 34, ly, "start", 11, "legend", c->series[s].label);
    }
    fputs("</g>\n", f);
}

void dt_svg_stacked_bars(FILE *f, const char *title, const char *unit, const char *const *rows,
                         int nrows, const char *const *parts, int nparts, const double *values,
                         double x, double y, double w, double h)
{
    const double px = x + 80, py = y + 30, pw = w - 80 - 260,
                 bh = (h - 60) / (nrows > 0 ? nrows : 1);
    double most = 0;
    for (int r = 0; r < nrows; r++) {
        double sum = 0;
        for (int p = 0; p < nparts; p++)
            sum += values[r * nparts + p];
        most = fmax(most, sum);
    }
    if (most <= 0)
        most = 1;
    text(f, x + w / 2, y + 18, "middle", 14, "title", title);
    for (int r = 0; r < nrows; r++) {
        const double by = py + bh * r + bh * 0.15;
        double at = px, sum = 0;
        text(f, px - 8, by + bh * 0.45, "end", 12, "row", rows[r]);
        for (int p = 0; p < nparts; p++) {
            const double v = values[r * nparts + p], bw = pw * v / most;
            sum += v;
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\">"
                    "<title>%s %s: %.3f %s</title></rect>\n",
                    at, by, bw, bh * 0.7, palette[p % NCOLORS], rows[r], parts[p], v, unit);
            at += bw;
        }
        char total[48];
        snprintf(total, sizeof total, "%.1f %s", sum, unit);
        text(f, at + 6, by + bh * 0.45, "start", 11, "total", total);
    }
    for (int p = 0; p < nparts; p++) {
        const double ly = py + 12 + 18 * p;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>\n",
                x + w - 150, ly - 9, palette[p % NCOLORS]);
        text(f, x + w - 130, ly, "start", 11, "legend", parts[p]);
    }
}
