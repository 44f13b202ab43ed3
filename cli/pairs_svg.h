/*
 * pairs_svg.h - `bench pairs --svg FILE` (pairs_svg.c): the matrix as an
 * SVG heatmap, written as text with no library.  Two panels, each
 * direction alone and both directions at once; a cell per direction
 * (row: the sender, column: the receiver), coloured by its GB/s
 * relative to the reference it was judged against (the median, or its
 * baseline); the diagonal hatched; ranks and host labels on both axes; a
 * legend; the verdict's cells outlined and its words as the caption.
 * Above PAIRS_SVG_CELLS ranks a cell stands for a block of ranks and
 * shows the block's worst ratio, so the file stays small and a slow cell
 * still shows.  Every label is escaped for XML, bytes that are not UTF-8
 * and control characters replaced.
 */
#ifndef SR_PAIRS_SVG_H
#define SR_PAIRS_SVG_H

#include <stddef.h>
#include <stdio.h>

#include "pairs_matrix.h"
#include "pairs_verdict.h"

/* The most cells a panel draws on a side. */
#define PAIRS_SVG_CELLS 256u

/* The heatmap of m judged by v, to out. */
void pairs_svg_print(FILE *out, const struct pairs_matrix *m,
    const struct pairs_verdict *v);
/*
 * The same into path, replaced whole (written beside it, then renamed):
 * 0, or -1 with why ("--svg 'x/y.svg': No such file or directory").
 */
int pairs_svg_write(const char *path, const struct pairs_matrix *m,
    const struct pairs_verdict *v, char *why, size_t why_size);
/* text as XML character data or an attribute value: & < > " ' escaped,
 * invalid UTF-8 and control characters as U+FFFD. */
void pairs_svg_text(FILE *out, const char *text);

#endif
