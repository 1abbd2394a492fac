/* svg.h — the few charts `dtrain plot` draws, as plain SVG text: line charts (linear or
 * logarithmic axes, several series, a legend) and horizontal stacked bars. No library: an
 * SVG file is text, and these are a handful of elements. */
#ifndef DT_CLI_SVG_H
#define DT_CLI_SVG_H

#include <stdio.h>

typedef struct dt_svg_series {
    const char *label;
    const double *x, *y;
    int n;
    int points; /* 1: markers at the points as well as the line (few points) */
} dt_svg_series;

/* What an axis' values are, for its ticks. */
typedef struct dt_svg_axis_opts {
    int whole;    /* counts (steps, epochs): ticks on whole numbers only */
    int fraction; /* a fraction (accuracy): the axis stays inside [0, 1] */
} dt_svg_axis_opts;

typedef struct dt_svg_chart {
    const char *title, *xlabel, *ylabel;
    int logx, logy; /* logarithmic axes (values <= 0 are left out) */
    const dt_svg_series *series;
    int nseries;
    dt_svg_axis_opts x, y; /* linear axes only */
} dt_svg_chart;

/* A document of width x height pixels on a white ground. */
void dt_svg_begin(FILE *f, int width, int height);
void dt_svg_end(FILE *f);
/* A line chart in the box (x, y, w, h), axes with ticks and a legend, in a <g
 * class="chart">. Ticks sit at round values (multiples of 1, 2 or 5 x 10^k, or powers of
 * ten on a logarithmic axis), labelled 0.85, 420, 95k, 1.2M: no two alike. Each <text> has
 * a class saying what it is (title, tick x, tick y, label x, label y, legend). */
void dt_svg_line_chart(FILE *f, const dt_svg_chart *c, double x, double y, double w, double h);
/* One horizontal bar per row, split into parts (values[row * nparts + part] >= 0), with the
 * row's total at its end and a legend of the parts. */
void dt_svg_stacked_bars(FILE *f, const char *title, const char *unit, const char *const *rows,
                         int nrows, const char *const *parts, int nparts, const double *values,
                         double x, double y, double w, double h);

#endif
