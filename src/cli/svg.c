/* svg.c — line charts and stacked bars as SVG text (svg.h). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/svg.h"

/* Distinct colours that stay apart for the colour-blind (Okabe and Ito's palette). */
static const char *const palette[] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                      "#E69F00", "#56B4E9", "#F0E442", "#000000"};
#define NCOLORS ((int)(sizeof palette / sizeof palette[0]))

static void text(FILE *f, double x, double y, const char *anchor, int size, const char *s)
{
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\" font-size=\"%d\">", x, y, anchor,
            size);
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

typedef struct axis {
    double lo, hi;
    int log;
} axis;

static double tr(const axis *a, double v)
{
    return a->log ? log10(v) : v;
}

/* The data's range on one axis (logarithmic: of the positive values), widened when flat. */
static axis range(const dt_svg_chart *c, int is_y, int log)
{
    axis a = {INFINITY, -INFINITY, log};
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
    if (a.hi - a.lo < 1e-12) {
        a.lo -= 0.5;
        a.hi += 0.5;
    } else if (is_y && !log) {
        const double pad = 0.05 * (a.hi - a.lo);
        a.lo -= pad;
        a.hi += pad;
    }
    return a;
}

/* Five ticks: the values at the axis' quarters (powers of ten on a log axis). */
static void ticks(FILE *f, const axis *a, int is_y, double x, double y, double w, double h)
{
    for (int k = 0; k <= 4; k++) {
        const double t = a->lo + (a->hi - a->lo) * k / 4.0, v = a->log ? pow(10.0, t) : t;
        char label[32];
        /* Whole numbers in full up to a million (samples/s, bytes read better than 9.2e+04). */
        if (fabs(v) >= 100 && fabs(v) < 1e6)
            snprintf(label, sizeof label, "%.0f", v);
        else
            snprintf(label, sizeof label, "%.3g", v);
        if (is_y) {
            const double py = y + h - h * k / 4.0;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    x, py, x + w, py);
            text(f, x - 6, py + 4, "end", 11, label);
        } else {
            const double px = x + w * k / 4.0;
            fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                    px, y, px, y + h);
            text(f, px, y + h + 16, "middle", 11, label);
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
    text(f, x + w / 2, y + 18, "middle", 14, c->title);
    ticks(f, &ax, 0, px, py, pw, ph);
    ticks(f, &ay, 1, px, py, pw, ph);
    fprintf(f,
            "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            px, py, pw, ph);
    text(f, px + pw / 2, py + ph + 34, "middle", 12, c->xlabel);
    fprintf(f, "<g transform=\"translate(%.1f,%.1f) rotate(-90)\">", x + 16, py + ph / 2);
    text(f, 0, 0, "middle", 12, c->ylabel);
    fputs("</g>\n", f);
    for (int s = 0; s < c->nseries; s++) {
        const char *color = palette[s % NCOLORS];
        series(f, &c->series[s], color, &ax, &ay, px, py, pw, ph);
        const double ly = py + 12 + 18 * s;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"4\" fill=\"%s\"/>\n",
                px + pw + 14, ly - 5, color);
        text(f, px + pw + 34, ly, "start", 11, c->series[s].label);
    }
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
    text(f, x + w / 2, y + 18, "middle", 14, title);
    for (int r = 0; r < nrows; r++) {
        const double by = py + bh * r + bh * 0.15;
        double at = px, sum = 0;
        text(f, px - 8, by + bh * 0.45, "end", 12, rows[r]);
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
        text(f, at + 6, by + bh * 0.45, "start", 11, total);
    }
    for (int p = 0; p < nparts; p++) {
        const double ly = py + 12 + 18 * p;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>\n",
                x + w - 150, ly - 9, palette[p % NCOLORS]);
        text(f, x + w - 130, ly, "start", 11, parts[p]);
    }
}
