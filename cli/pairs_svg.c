/*
 * pairs_svg.c - the matrix as an SVG heatmap (see pairs_svg.h), written
 * by hand: rectangles, text and one gradient, nothing a viewer needs a
 * script or a font for.  Only this file knows the layout:
 *
 *     title, then the verdict's first words
 *               each direction alone          both directions at once
 *               0  1  2  3  (to, rotated)      0  1  2  3
 *     r0 host  [\][ ][ ][ ]                   [\][ ][ ][ ]
 *     r1 host  [ ][\][#][ ]   # outlined      [ ][\][#][#]
 *     ...
 *     legend: the colour of each ratio to the reference, the diagonal,
 *             an outlined cell
 *     caption: every finding in words
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_read.h"
#include "pairs_svg.h"

#define MARGIN 20.0
#define GAP 48.0		/* between the panels */
#define FONT 11.0		/* labels */
#define CHAR_W 6.4		/* a label character's width, about */
#define CAPTION_CHARS 110	/* a caption line, before it wraps */
#define CAPTION_LINES 16
#define TOOLTIPS_UP_TO 64	/* ranks: beyond, no per-cell titles */
#define OUTLINE_MIN 9.0		/* px: the least an outline is wide */

/* The colour scale, by log2 of the ratio to the reference. */
static const struct stop {
	double log2_ratio;
	unsigned char rgb[3];
} stops[] = {
	{ -5, { 0xa5, 0x00, 0x26 } },
	{ -3, { 0xf4, 0x6d, 0x43 } },
	{ -1, { 0xfe, 0xe0, 0x8b } },
	{ 0, { 0xa6, 0xd9, 0x6a } },
	{ 1, { 0x1a, 0x98, 0x50 } },
};
#define NSTOPS (sizeof(stops) / sizeof(stops[0]))

struct layout {
	const struct pairs_matrix *m;
	const struct pairs_verdict *v;
	uint32_t block;		/* ranks a cell stands for */
	uint32_t side;		/* cells a side */
	double cell;		/* px */
	uint32_t every;		/* a label every this many cells */
	double left, top;	/* the first panel's corner */
	double panel;		/* a panel's side, px */
	double width, height;
	double legend_y, caption_y;
	size_t label_chars;
};

void
pairs_svg_text(FILE *out, const char *text)
{
	const unsigned char *p = (const unsigned char *)text;
	const unsigned char *end = p + strlen(text);

	while (p < end) {
		size_t n;

		switch (*p) {
		case '&':
			fputs("&amp;", out);
			break;
		case '<':
			fputs("&lt;", out);
			break;
		case '>':
			fputs("&gt;", out);
			break;
		case '"':
			fputs("&quot;", out);
			break;
		case '\'':
			fputs("&apos;", out);
			break;
		default:
			/* XML 1.0 allows no control character but tab and
			 * newlines, not even as a reference. */
			if (*p < 0x20 || *p == 0x7f) {
				fputs("\xef\xbf\xbd", out);
				break;
			}
			if (*p < 0x80) {
				putc(*p, out);
				break;
			}
			if ((n = json_utf8_length(p, end)) == 0) {
				fputs("\xef\xbf\xbd", out);
				break;
			}
			fwrite(p, 1, n, out);
			p += n;
			continue;
		}
		p++;
	}
}

static void
colour(double ratio, char out[8])
{
	double x = ratio > 0 ? log2(ratio) : stops[0].log2_ratio;
	size_t i = 0;
	double t;
	unsigned char rgb[3];

	if (!isfinite(x) || x <= stops[0].log2_ratio)
		x = stops[0].log2_ratio;
	if (x >= stops[NSTOPS - 1].log2_ratio)
		x = stops[NSTOPS - 1].log2_ratio;
	while (i + 2 < NSTOPS && x > stops[i + 1].log2_ratio)
		i++;
	t = (x - stops[i].log2_ratio) / (stops[i + 1].log2_ratio -
	    stops[i].log2_ratio);
	for (int k = 0; k < 3; k++)
		rgb[k] = (unsigned char)lround(stops[i].rgb[k] + t *
		    (stops[i + 1].rgb[k] - stops[i].rgb[k]));
	snprintf(out, 8, "#%02x%02x%02x", rgb[0], rgb[1], rgb[2]);
}

static unsigned caption(FILE *out, const struct layout *l);

/* "r3 10.0.0.4", or for a block "r4-7 10.0.0.5" (its first rank's). */
static void
axis_label(const struct layout *l, uint32_t cell, char *buf, size_t size)
{
	uint32_t first = cell * l->block;
	uint32_t last = first + l->block - 1;

	if (last >= l->m->world)
		last = l->m->world - 1;
	if (first == last)
		snprintf(buf, size, "r%u %s", first, l->m->label[first]);
	else
		snprintf(buf, size, "r%u-%u %s", first, last,
		    l->m->label[first]);
}

static void
plan_layout(struct layout *l, const struct pairs_matrix *m,
    const struct pairs_verdict *v)
{
	char label[PAIRS_LABEL_MAX + 32];

	memset(l, 0, sizeof(*l));
	l->m = m;
	l->v = v;
	l->block = (m->world + PAIRS_SVG_CELLS - 1) / PAIRS_SVG_CELLS;
	l->side = (m->world + l->block - 1) / l->block;
	l->cell = m->world <= 16 ? 32 : 640.0 / l->side;
	if (l->cell > 32)
		l->cell = 32;
	if (l->cell < 3)
		l->cell = 3;
	l->every = (uint32_t)ceil((FONT + 2) / l->cell);
	for (uint32_t c = 0; c < l->side; c += l->every) {
		axis_label(l, c, label, sizeof(label));
		if (strlen(label) > l->label_chars)
			l->label_chars = strlen(label);
	}
	l->panel = l->side * l->cell;
	l->left = MARGIN + 8 + CHAR_W * (double)l->label_chars;
	l->top = MARGIN + 64 + 8 + CHAR_W * (double)l->label_chars;
	l->width = l->left + 2 * l->panel + GAP + MARGIN;
	if (l->width < 760)
		l->width = 760;
	l->legend_y = l->top + l->panel + 28;
	l->caption_y = l->legend_y + 84;
	l->height = l->caption_y + 18.0 * caption(NULL, l) + MARGIN;
}

/* The ratio a block shows: its worst cell's; whether one is slow; NaN
 * for a block of the diagonal alone. */
static double
block_ratio(const struct layout *l, enum pairs_mode mode, uint32_t row,
    uint32_t col, bool *slow)
{
	const struct pairs_matrix *m = l->m;
	double worst = NAN;

	*slow = false;
	for (uint32_t a = row * l->block; a < (row + 1) * l->block &&
	    a < m->world; a++)
		for (uint32_t b = col * l->block; b < (col + 1) * l->block &&
		    b < m->world; b++) {
			size_t c = (size_t)a * m->world + b;
			double r;

			if (a == b)
				continue;
			r = pairs_cell_median(m, mode, a, b) /
			    l->v->reference[mode][c];
			if (isnan(worst) || r < worst)
				worst = r;
			*slow = *slow || (l->v->flags[mode][c] &
			    PAIRS_CELL_SLOW);
		}
	return worst;
}

static void
tooltip(FILE *out, const struct layout *l, enum pairs_mode mode, uint32_t a,
    uint32_t b)
{
	const struct pairs_matrix *m = l->m;
	size_t c = (size_t)a * m->world + b;
	char text[PAIRS_LABEL_MAX * 2 + 200];

	snprintf(text, sizeof(text), "rank %u (%s) -> rank %u (%s), %s: %.4g "
	    "GB/s, %.3gx its reference %.4g GB/s%s", a, m->label[a], b,
	    m->label[b], mode == PAIRS_MODE_ALONE ? "alone" :
	    "both directions at once", pairs_cell_median(m, mode, a, b),
	    pairs_cell_median(m, mode, a, b) / l->v->reference[mode][c],
	    l->v->reference[mode][c], l->v->flags[mode][c] & PAIRS_CELL_SLOW ?
	    ", slow" : "");
	fputs("<title>", out);
	pairs_svg_text(out, text);
	fputs("</title>", out);
}

static void
panel(FILE *out, const struct layout *l, enum pairs_mode mode, double x0)
{
	bool tips = l->block == 1 && l->m->world <= TOOLTIPS_UP_TO;
	double c = l->cell;
	char fill[8];

	fprintf(out, "<g class=\"panel\" data-mode=\"%s\">\n",
	    pairs_mode_key(mode));
	for (uint32_t row = 0; row < l->side; row++)
		for (uint32_t col = 0; col < l->side; col++) {
			double x = x0 + col * c, y = l->top + row * c;
			bool slow;
			double r = block_ratio(l, mode, row, col, &slow);

			if (isnan(r)) {
				fprintf(out, "<rect class=\"diagonal\" "
				    "x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				    "height=\"%.1f\" fill=\"#d9d9d9\"/><line "
				    "x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				    "y2=\"%.1f\" stroke=\"#888\"/>\n", x, y, c,
				    c, x, y, x + c, y + c);
				continue;
			}
			colour(r, fill);
			fprintf(out, "<rect class=\"cell%s\" data-from=\"%u\" "
			    "data-to=\"%u\" x=\"%.1f\" y=\"%.1f\" "
			    "width=\"%.1f\" height=\"%.1f\" fill=\"%s\"",
			    slow ? " slow" : "",
			    row * l->block, col * l->block, x, y, c, c, fill);
			if (tips) {
				fputs(">", out);
				tooltip(out, l, mode, row, col);
				fputs("</rect>\n", out);
			} else {
				fputs("/>\n", out);
			}
		}
	/* Outlines on top, so a neighbour does not paint over them; around
	 * a cell too small to see, a ring of OUTLINE_MIN px. */
	for (uint32_t row = 0; row < l->side; row++)
		for (uint32_t col = 0; col < l->side; col++) {
			bool slow;
			double side = c >= OUTLINE_MIN ? c - 2 : OUTLINE_MIN;
			double inset = (c - side) / 2;

			block_ratio(l, mode, row, col, &slow);
			if (slow)
				fprintf(out, "<rect class=\"outline\" "
				    "data-from=\"%u\" data-to=\"%u\" "
				    "x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
				    "height=\"%.1f\" fill=\"none\" "
				    "stroke=\"#000\" stroke-width=\"%.1f\"/>\n",
				    row * l->block,
				    col * l->block, x0 + col * c + inset,
				    l->top + row * c + inset, side, side,
				    c >= 12 ? 2.0 : 1.5);
		}
	fputs("</g>\n", out);
}

static void
axes(FILE *out, const struct layout *l, double x0, const char *title,
    bool rows)
{
	char label[PAIRS_LABEL_MAX + 32];
	double c = l->cell;

	fprintf(out, "<text class=\"panel-title\" x=\"%.1f\" y=\"%.1f\" "
	    "font-size=\"13\" font-weight=\"bold\">", x0, MARGIN + 52);
	pairs_svg_text(out, title);
	fputs("</text>\n", out);
	for (uint32_t i = 0; i < l->side; i += l->every) {
		double mid = i * c + c / 2 + FONT / 3;

		axis_label(l, i, label, sizeof(label));
		fprintf(out, "<text class=\"to\" transform=\"translate(%.1f "
		    "%.1f) rotate(-90)\">", x0 + mid, l->top - 6);
		pairs_svg_text(out, label);
		fputs("</text>\n", out);
		if (!rows)
			continue;
		fprintf(out, "<text class=\"from\" x=\"%.1f\" y=\"%.1f\" "
		    "text-anchor=\"end\">", x0 - 6, l->top + mid);
		pairs_svg_text(out, label);
		fputs("</text>\n", out);
	}
}

static void
legend(FILE *out, const struct layout *l)
{
	static const double ticks[] = { 1.0 / 32, 0.125, 0.5, 1, 2 };
	static const char *const names[] = { "1/32x", "1/8x", "0.5x", "1x",
	    "2x" };
	double x0 = l->left, y = l->legend_y, w = 320;
	double span = stops[NSTOPS - 1].log2_ratio - stops[0].log2_ratio;
	double thr = l->v->threshold_used[PAIRS_MODE_ALONE];
	char fill[8];

	fputs("<defs><linearGradient id=\"scale\" x1=\"0\" x2=\"1\" y1=\"0\" "
	    "y2=\"0\">", out);
	for (size_t i = 0; i < NSTOPS; i++) {
		colour(exp2(stops[i].log2_ratio), fill);
		fprintf(out, "<stop offset=\"%.3f\" stop-color=\"%s\"/>",
		    (stops[i].log2_ratio - stops[0].log2_ratio) / span, fill);
	}
	fputs("</linearGradient></defs>\n", out);
	fprintf(out, "<g class=\"legend\"><text x=\"%.1f\" y=\"%.1f\">GB/s "
	    "relative to the reference (%s)</text>\n", x0, y - 6,
	    l->v->with_baseline ? "the cell in the baseline, scaled by the "
	    "median cell's ratio to it" : "the median cell");
	fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"14\" "
	    "fill=\"url(#scale)\" stroke=\"#444\"/>\n", x0, y, w);
	for (size_t i = 0; i < sizeof(ticks) / sizeof(ticks[0]); i++) {
		double x = x0 + (log2(ticks[i]) - stops[0].log2_ratio) /
		    span * w;

		fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
		    "y2=\"%.1f\" stroke=\"#444\"/><text x=\"%.1f\" y=\"%.1f\" "
		    "text-anchor=\"middle\">%s</text>\n", x, y + 14, x, y + 18,
		    x, y + 30, names[i]);
	}
	if (thr > 0) {
		double x = x0 + (log2(thr) - stops[0].log2_ratio) / span * w;

		fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
		    "y2=\"%.1f\" stroke=\"#000\" stroke-width=\"2\"/><text "
		    "x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">slow below "
		    "%.2gx</text>\n", x, y - 2, x, y + 16, x, y + 44, thr);
	}
	x0 += w + 40;
	fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" "
	    "fill=\"#d9d9d9\"/><line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
	    "y2=\"%.1f\" stroke=\"#888\"/><text x=\"%.1f\" y=\"%.1f\">a rank "
	    "and itself</text>\n", x0, y, x0, y, x0 + 14, y + 14, x0 + 20,
	    y + 11);
	fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"14\" "
	    "fill=\"#fee08b\" stroke=\"#000\" stroke-width=\"2\"/><text "
	    "x=\"%.1f\" y=\"%.1f\">the verdict's cells</text>\n", x0, y + 22,
	    x0 + 20, y + 33);
	if (l->block > 1)
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\">a cell: %u x %u "
		    "ranks, its worst</text>\n", x0, y + 55, l->block,
		    l->block);
	fputs("</g>\n", out);
}

/* text in lines of about CAPTION_CHARS, broken at spaces; with out
 * NULL only counted. */
static unsigned
caption_lines(FILE *out, const struct layout *l, const char *text,
    unsigned line)
{
	size_t len = strlen(text), at = 0;

	while (at < len && line < CAPTION_LINES) {
		size_t n = len - at <= CAPTION_CHARS ? len - at : CAPTION_CHARS;
		char piece[CAPTION_CHARS + 1];
		bool first = at == 0;

		if (at + n < len)
			while (n > CAPTION_CHARS / 2 && text[at + n] != ' ')
				n--;
		/* Never inside a character's UTF-8 bytes. */
		while (n > 1 && at + n < len &&
		    ((unsigned char)text[at + n] & 0xc0) == 0x80)
			n--;
		memcpy(piece, text + at, n);
		piece[n] = '\0';
		at += n;
		while (at < len && text[at] == ' ')
			at++;
		if (out != NULL) {
			fprintf(out, "<text class=\"verdict\" x=\"%.1f\" "
			    "y=\"%.1f\">%s", MARGIN, l->caption_y + 18.0 * line,
			    first ? "" : "    ");
			pairs_svg_text(out, piece);
			fputs("</text>\n", out);
		}
		line++;
	}
	return line;
}

/* The caption's lines, written (out) or counted (out NULL). */
static unsigned
caption(FILE *out, const struct layout *l)
{
	const struct pairs_verdict *v = l->v;
	char text[2048];
	unsigned line = 0;
	size_t i;

	if (out != NULL)
		fprintf(out, "<g class=\"caption\" font-size=\"12\">\n");
	if (v->nfindings == 0)
		line = caption_lines(out, l, pairs_verdict_text(l->m, v, text,
		    sizeof(text)), line);
	for (i = 0; i < v->nfindings && line < CAPTION_LINES; i++)
		line = caption_lines(out, l, pairs_finding_text(l->m, v,
		    &v->findings[i], text, sizeof(text)), line);
	if (i < v->nfindings && out != NULL)
		fprintf(out, "<text class=\"verdict\" x=\"%.1f\" y=\"%.1f\">"
		    "and %zu more (see the text or JSON output)</text>\n",
		    MARGIN, l->caption_y + 18.0 * line, v->nfindings - i);
	if (out != NULL)
		fputs("</g>\n", out);
	return line + (i < v->nfindings);
}

void
pairs_svg_print(FILE *out, const struct pairs_matrix *m,
    const struct pairs_verdict *v)
{
	struct layout l;
	char text[2048];
	double x1;

	plan_layout(&l, m, v);
	x1 = l.left + l.panel + GAP;
	fprintf(out, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
	    "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" "
	    "width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
	    "font-family=\"sans-serif\" font-size=\"%.0f\">\n", l.width,
	    l.height, l.width, l.height, FONT);
	fputs("<title>silvic-ring bench pairs</title>\n<desc>", out);
	pairs_svg_text(out, pairs_verdict_text(m, v, text, sizeof(text)));
	fputs("</desc>\n", out);
	fprintf(out, "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
	    "<text class=\"title\" x=\"%.1f\" y=\"%.1f\" font-size=\"15\" "
	    "font-weight=\"bold\">silvic-ring bench pairs: world %u on %u "
	    "host%s, GB/s per direction (row: from, column: to)</text>\n",
	    MARGIN, MARGIN + 8, m->world, m->nhosts, m->nhosts == 1 ? "" : "s");
	fprintf(out, "<text class=\"summary\" x=\"%.1f\" y=\"%.1f\" "
	    "font-size=\"12\">", MARGIN, MARGIN + 28);
	pairs_svg_text(out, v->pass ? "verdict: ok" : v->nfindings == 1 ?
	    "verdict: 1 finding (below)" : "verdict: findings (below)");
	fprintf(out, "; median %.4g GB/s alone, %.4g GB/s both directions at "
	    "once</text>\n", v->median_gbps[PAIRS_MODE_ALONE],
	    v->median_gbps[PAIRS_MODE_BOTH]);
	axes(out, &l, l.left, "each direction alone", true);
	axes(out, &l, x1, "both directions at once", false);
	panel(out, &l, PAIRS_MODE_ALONE, l.left);
	panel(out, &l, PAIRS_MODE_BOTH, x1);
	legend(out, &l);
	(void)caption(out, &l);
	fputs("</svg>\n", out);
}

int
pairs_svg_write(const char *path, const struct pairs_matrix *m,
    const struct pairs_verdict *v, char *why, size_t why_size)
{
	size_t n = strlen(path) + 16;
	char *tmp = malloc(n);
	FILE *out;
	int saved;

	if (tmp == NULL) {
		snprintf(why, why_size, "--svg '%s': out of memory", path);
		return -1;
	}
	snprintf(tmp, n, "%s.tmp%ld", path, (long)getpid());
	if ((out = fopen(tmp, "w")) == NULL) {
		snprintf(why, why_size, "--svg '%s': %s", path,
		    strerror(errno));
		free(tmp);
		return -1;
	}
	pairs_svg_print(out, m, v);
	if (ferror(out) | fclose(out)) {
		saved = errno;
		unlink(tmp);
		snprintf(why, why_size, "--svg '%s': %s", path,
		    strerror(saved ? saved : EIO));
		free(tmp);
		return -1;
	}
	if (rename(tmp, path) != 0) {
		saved = errno;
		unlink(tmp);
		snprintf(why, why_size, "--svg '%s': %s", path,
		    strerror(saved));
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}
