/* rcoll_sched's picture: one lane per rank, one column per step in
 * dependency order (the unit-step replay, lib/plan_replay.h: a rank does
 * one step per column, a message lands in a later column), an arrow per
 * message. Colour and number say which part of the vector a step carries
 * (sched_band). Then a PNG beside the SVG, when a converter is found. */
#include <errno.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "rcoll_sched.h"
#include "reduce.h"

extern char **environ;

#define LEFT 92      /* lane labels */
#define TOP 96       /* title and legend */
#define LANE_H 54
#define COL_W 30
#define BOX_W 24
#define BOX_H 20
#define RIGHT 24
#define BOTTOM 34    /* column numbers */
#define MAX_COLS 240 /* wider pictures are cut, and say so */
#define MIN_WIDTH 980

typedef struct canvas {
  FILE *f;
  const sched_t *s;
  int cols;  /* columns drawn */
  int total; /* columns in the schedule */
} canvas_t;

/* ------------------------------------------------------------ geometry, colour */

static double col_x(int col) { return LEFT + col * COL_W + COL_W / 2.0; }
static double lane_y(int r) { return TOP + r * LANE_H + LANE_H / 2.0; }

static int column(const sched_t *s, int r, int k) { return (int)s->unit.start[s->unit.base[r] + k]; }

/* Band b of n as an sRGB colour: hues spread round the wheel. */
static void band_colour(int b, int n, char out[8]) {
  if (b < 0) {
    snprintf(out, 8, "#888888");
    return;
  }
  double h = fmod(360.0 * b / (n > 0 ? n : 1) + 210, 360) / 60, s = 0.65, l = 0.45;
  double c = (1 - fabs(2 * l - 1)) * s, x = c * (1 - fabs(fmod(h, 2) - 1)), m = l - c / 2;
  double rgb[6][3] = {{c, x, 0}, {x, c, 0}, {0, c, x}, {0, x, c}, {x, 0, c}, {c, 0, x}};
  const double *v = rgb[(int)h % 6];
  snprintf(out, 8, "#%02x%02x%02x", (int)lround((v[0] + m) * 255), (int)lround((v[1] + m) * 255),
           (int)lround((v[2] + m) * 255));
}

/* ------------------------------------------------------------ pieces */

static void draw_lanes(canvas_t *cv, double width) {
  const sched_t *s = cv->s;
  for (int r = 0; r < s->n; r++) {
    double y = TOP + r * LANE_H;
    int node = s->node_of[r];
    fprintf(cv->f, "<rect x='0' y='%.1f' width='%.1f' height='%d' fill='%s'/>\n", y, width, LANE_H,
            node % 2 ? "#f6efe2" : "#eaf0f7");
    fprintf(cv->f, "<line x1='0' y1='%.1f' x2='%.1f' y2='%.1f' stroke='#c8ccd4' stroke-width='0.8'/>\n", y, width, y);
    fprintf(cv->f, "<text x='10' y='%.1f' class='lane'>rank %d</text>\n", lane_y(r) - 2, r);
    fprintf(cv->f, "<text x='10' y='%.1f' class='small'>node %d</text>\n", lane_y(r) + 13, node);
  }
  for (int c = 0; c < cv->cols; c += 5) {
    fprintf(cv->f, "<line x1='%.1f' y1='%d' x2='%.1f' y2='%d' stroke='#d6d9df' stroke-width='0.6' "
            "stroke-dasharray='2,3'/>\n", col_x(c), TOP, col_x(c), TOP + s->n * LANE_H);
    fprintf(cv->f, "<text x='%.1f' y='%d' class='small' text-anchor='middle'>%d</text>\n", col_x(c),
            TOP + s->n * LANE_H + 16, c);
  }
}

/* An arrow from (x1, y1) to (x2, y2), its head drawn as a triangle so that
 * it takes the line's colour in every renderer. */
static void arrow(FILE *f, double x1, double y1, double x2, double y2, const char *colour) {
  double dx = x2 - x1, dy = y2 - y1, len = hypot(dx, dy);
  if (len < 1)
    return;
  dx /= len, dy /= len;
  double bx = x2 - 8 * dx, by = y2 - 8 * dy;
  fprintf(f, "<line x1='%.1f' y1='%.1f' x2='%.1f' y2='%.1f' stroke='%s' stroke-width='1.4' "
          "stroke-opacity='0.85'/>\n", x1, y1, bx, by, colour);
  fprintf(f, "<polygon points='%.1f,%.1f %.1f,%.1f %.1f,%.1f' fill='%s'/>\n", x2, y2, bx - 3.5 * dy,
          by + 3.5 * dx, bx + 3.5 * dy, by - 3.5 * dx, colour);
}

/* The k-th send from a to b meets b's k-th receive from a: walk both
 * plans once per pair. */
static void draw_messages(canvas_t *cv) {
  const sched_t *s = cv->s;
  for (int a = 0; a < s->n; a++)
    for (int b = 0; b < s->n; b++) {
      const rcoll_plan_t *pa = s->world.plans[a], *pb = s->world.plans[b];
      int j = 0;
      for (int i = 0; i < pa->nsteps; i++) {
        const rcoll_step_t *st = &pa->steps[i];
        if (st->kind != RCOLL_STEP_SEND || st->peer != b)
          continue;
        while (j < pb->nsteps && !((pb->steps[j].kind == RCOLL_STEP_RECV ||
                                    pb->steps[j].kind == RCOLL_STEP_RECV_REDUCE) && pb->steps[j].peer == a))
          j++;
        if (j == pb->nsteps)
          break;
        int c1 = column(s, a, i), c2 = column(s, b, j++);
        if (c2 >= cv->cols)
          continue;
        char colour[8];
        band_colour(sched_band(s, sched_step_offset(s, a, i)), sched_bands(s), colour);
        double sy = lane_y(a) + (b > a ? BOX_H / 2.0 : -BOX_H / 2.0);
        double ey = lane_y(b) + (b > a ? -BOX_H / 2.0 : BOX_H / 2.0);
        arrow(cv->f, col_x(c1) + BOX_W / 4.0, sy, col_x(c2) - BOX_W / 4.0, ey, colour);
      }
    }
}

/* A step's box: sends filled, receives pale, copies dashed; the number is
 * the band it carries, "+" marks a reduction. */
static void draw_box(FILE *f, double x, double y, const rcoll_step_t *st, int band, int bands) {
  char colour[8], label[16];
  band_colour(band, bands, colour);
  int board = (st->flags & RCOLL_STEP_BOARD) != 0;
  int send = st->kind == RCOLL_STEP_SEND, copy = st->kind == RCOLL_STEP_COPY && !board;
  if (board) /* the flat board: every rank's vector, summed in rank order */
    snprintf(label, sizeof label, "+all");
  else if (band < 0)
    snprintf(label, sizeof label, "%s", copy && st->src == NULL ? "avg" : "");
  else
    snprintf(label, sizeof label, "%s%d", st->kind == RCOLL_STEP_RECV_REDUCE ? "+" : "", band);
  fprintf(f, "<rect x='%.1f' y='%.1f' width='%d' height='%d' rx='3' fill='%s' fill-opacity='%s' stroke='%s' "
          "stroke-width='%s'%s/>\n", x - BOX_W / 2.0, y - BOX_H / 2.0, BOX_W, BOX_H, copy ? "#ffffff" : colour,
          send ? "1" : "0.28", colour, send ? "1" : "1.6", copy ? " stroke-dasharray='3,2'" : "");
  fprintf(f, "<text x='%.1f' y='%.1f' class='box' text-anchor='middle' fill='%s'>%s</text>\n", x, y + 4,
          send ? "#ffffff" : "#1d2230", label);
}

static void draw_steps(canvas_t *cv) {
  const sched_t *s = cv->s;
  for (int r = 0; r < s->n; r++) {
    const rcoll_plan_t *p = s->world.plans[r];
    for (int k = 0; k < p->nsteps; k++) {
      const rcoll_step_t *st = &p->steps[k];
      int c = column(s, r, k);
      if (rcoll_step_is_join(st) || c >= cv->cols)
        continue;
      draw_box(cv->f, col_x(c), lane_y(r), st, sched_band(s, sched_step_offset(s, r, k)), sched_bands(s));
    }
  }
}

/* Legend: the kinds of step, then the bands of the vector. Text widths
 * are estimated (6 px a character at 11 px), to place what follows; the
 * picture is made wide enough for all of it (legend_width). */
static const char *const kind_names[4] = {"send", "receive", "receive and reduce", "local copy"};
#define BOARD_NAME "on the shared board: every rank's vector, summed (no messages)"

static int has_board(const sched_t *s) {
  for (int r = 0; r < s->n; r++)
    for (int k = 0; k < s->world.plans[r]->nsteps; k++)
      if (s->world.plans[r]->steps[k].flags & RCOLL_STEP_BOARD)
        return 1;
  return 0;
}

static void band_text(const sched_t *s, char *text, size_t len) {
  if (s->npieces > 0)
    snprintf(text, len, "number and colour: which of the %d piece%s of the vector it carries:", s->npieces,
             s->npieces > 1 ? "s" : "");
  else
    snprintf(text, len, "number and colour: which 16th of the vector it carries:");
}

static double legend_width(const sched_t *s) {
  char text[96];
  double x = 22;
  for (int k = 0; k < 4; k++)
    x += 40 + 6.0 * (double)strlen(kind_names[k]);
  if (has_board(s))
    x += 40 + 6.0 * (double)strlen(BOARD_NAME);
  band_text(s, text, sizeof text);
  return x + 6.0 * (double)strlen(text) + 12 + 27 * sched_bands(s) + RIGHT;
}

static void draw_legend(canvas_t *cv) {
  FILE *f = cv->f;
  const sched_t *s = cv->s;
  static const char data[1];
  static const rcoll_step_t kinds[4] = {{.kind = RCOLL_STEP_SEND}, {.kind = RCOLL_STEP_RECV},
                                        {.kind = RCOLL_STEP_RECV_REDUCE}, {.kind = RCOLL_STEP_COPY, .src = data}};
  double x = 22, y = 74;
  for (int k = 0; k < 4; k++) {
    draw_box(f, x, y, &kinds[k], 0, sched_bands(s));
    fprintf(f, "<text x='%.1f' y='%.1f' class='small'>%s</text>\n", x + 17, y + 4, kind_names[k]);
    x += 40 + 6.0 * (double)strlen(kind_names[k]);
  }
  if (has_board(s)) {
    static const rcoll_step_t board = {.kind = RCOLL_STEP_COPY, .flags = RCOLL_STEP_BOARD, .src = data};
    draw_box(f, x, y, &board, 0, sched_bands(s));
    fprintf(f, "<text x='%.1f' y='%.1f' class='small'>%s</text>\n", x + 17, y + 4, BOARD_NAME);
    x += 40 + 6.0 * (double)strlen(BOARD_NAME);
  }
  char text[96];
  band_text(s, text, sizeof text);
  fprintf(f, "<text x='%.1f' y='%.1f' class='small'>%s</text>\n", x, y + 4, text);
  x += 6.0 * (double)strlen(text) + 12;
  for (int b = 0; b < sched_bands(s); b++, x += 27) {
    char colour[8];
    band_colour(b, sched_bands(s), colour);
    fprintf(f, "<rect x='%.1f' y='%.1f' width='24' height='16' fill='%s'/>", x, y - 8, colour);
    fprintf(f, "<text x='%.1f' y='%.1f' class='box' text-anchor='middle' fill='#ffffff'>%d</text>\n", x + 12,
            y + 4, b);
  }
}

static void draw_title(canvas_t *cv) {
  const sched_t *s = cv->s;
  int messages = 0;
  for (int r = 0; r < s->n; r++)
    for (int k = 0; k < s->world.plans[r]->nsteps; k++)
      messages += s->world.plans[r]->steps[k].kind == RCOLL_STEP_SEND;
  fprintf(cv->f, "<text x='10' y='24' class='title'>%s %s: %d ranks on %d node%s, %zu bytes (%zu x %s%s), "
          "chunk %zu, %d messages</text>\n", rcoll_coll_name(s->coll), s->algo->name, s->n, s->nodes,
          s->nodes > 1 ? "s" : "", s->vector, s->count, rcoll_type_name(s->dtype),
          rcoll_coll_per_rank(s->coll) ? " per rank" : "", s->chunk,
          messages);
  char cut[96] = "";
  if (cv->cols < cv->total)
    snprintf(cut, sizeof cut, " (the first %d of %d columns: a larger --chunk or smaller --bytes shows all)",
             cv->cols, cv->total);
  char tuner[48] = "no tuner prediction";
  if (s->tuner_us >= 0)
    snprintf(tuner, sizeof tuner, "tuner %.1f us", s->tuner_us);
  fprintf(cv->f, "<text x='10' y='46' class='small'>simulated %.1f us, %s. Columns: steps in dependency "
          "order, one per rank per column; arrows: messages%s</text>\n", s->timed.total, tuner, cut);
}

/* ------------------------------------------------------------ files */

static int write_svg(const sched_t *s, const char *path) {
  FILE *f = fopen(path, "w");
  if (f == NULL) {
    fprintf(stderr, "rcoll_sched: cannot write %s: %s\n", path, strerror(errno));
    return -1;
  }
  canvas_t cv = {f, s, 0, (int)ceil(s->unit.total)};
  cv.cols = cv.total < MAX_COLS ? cv.total : MAX_COLS;
  double width = fmax(fmax(LEFT + cv.cols * COL_W + RIGHT, MIN_WIDTH), legend_width(s)), height = TOP + s->n * LANE_H + BOTTOM;
  fprintf(f, "<?xml version='1.0' encoding='UTF-8'?>\n<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' "
          "height='%.0f' viewBox='0 0 %.0f %.0f'>\n<style>text{font-family:DejaVu Sans,Arial,sans-serif}"
          ".title{font-size:15px;font-weight:bold}.lane{font-size:13px;font-weight:bold}.small{font-size:11px}"
          ".box{font-size:10px;font-weight:bold}</style>\n<rect width='100%%' height='100%%' fill='#ffffff'/>\n",
          width, height, width, height);
  draw_title(&cv);
  draw_legend(&cv);
  draw_lanes(&cv, width);
  draw_messages(&cv);
  draw_steps(&cv);
  fprintf(f, "<text x='%.1f' y='%.0f' class='small' text-anchor='end'>column</text>\n</svg>\n", width - 8,
          height - 6);
  if (fclose(f) != 0) {
    fprintf(stderr, "rcoll_sched: writing %s failed: %s\n", path, strerror(errno));
    return -1;
  }
  return 0;
}

/* Runs a converter; 0 when it ran and succeeded, 1 when it is not
 * installed, -1 when it failed. */
static int run_converter(char *const argv[]) {
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], NULL, NULL, argv, environ), status;
  if (rc == ENOENT)
    return 1;
  if (rc != 0 || waitpid(pid, &status, 0) < 0)
    return -1;
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) /* spawned through a shell that did not find it */
    return 1;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* FILE.svg -> FILE.png (any other name gets .png added). */
static void to_png(const char *svg) {
  size_t len = strlen(svg);
  char *png = malloc(len + 5);
  if (png == NULL)
    return;
  snprintf(png, len + 5, "%.*s.png", (int)(len > 4 && strcmp(svg + len - 4, ".svg") == 0 ? len - 4 : len), svg);
  char *rsvg[] = {"rsvg-convert", "-o", png, (char *)svg, NULL};
  char *magick[] = {"convert", (char *)svg, png, NULL};
  int rc = run_converter(rsvg);
  const char *used = "rsvg-convert";
  if (rc != 0)
    rc = run_converter(magick), used = "convert";
  if (rc == 0)
    printf("# wrote %s (%s)\n", png, used);
  else if (rc > 0)
    printf("# no SVG converter found (rsvg-convert from librsvg2-bin, or ImageMagick's convert): wrote only "
           "the SVG\n");
  else
    printf("# converting to %s failed: wrote only the SVG\n", png);
  free(png);
}

int sched_svg_write(const sched_t *s, const char *path) {
  if (write_svg(s, path) != 0)
    return -1;
  printf("# wrote %s\n", path);
  to_png(path);
  return 0;
}
