/* Aligned text tables (ctl.h). */
#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ctl.h"

void ctl_table_init(struct ctl_table *t, size_t cols, const char *const *header)
{
	assert(cols > 0 && cols <= CTL_TABLE_COLS_MAX);
	memset(t, 0, sizeof *t);
	t->cols = cols;
	t->rows = 1;
	for (size_t c = 0; c < cols; c++)
		snprintf(t->cells[0][c], CTL_CELL_MAX, "%s", header[c]);
}

bool ctl_table_row(struct ctl_table *t)
{
	if (t->rows == CTL_TABLE_ROWS_MAX)
		return false;
	t->rows++;
	return true;
}

void ctl_table_set(struct ctl_table *t, size_t col, const char *fmt, ...)
{
	assert(t->rows > 1 && col < t->cols);
	va_list ap;
	va_start(ap, fmt);
	char *cell = t->cells[t->rows - 1][col];
	vsnprintf(cell, CTL_CELL_MAX, fmt, ap);
	va_end(ap);
	/* A control byte from a server would break the layout. */
	for (char *p = cell; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

void ctl_table_print(const struct ctl_table *t)
{
	size_t width[CTL_TABLE_COLS_MAX] = {0};
	for (size_t r = 0; r < t->rows; r++)
		for (size_t c = 0; c < t->cols; c++) {
			size_t n = strlen(t->cells[r][c]);
			if (n > width[c])
				width[c] = n;
		}
	for (size_t r = 0; r < t->rows; r++) {
		for (size_t c = 0; c < t->cols; c++) {
			const char *cell = t->cells[r][c];
			if (c + 1 == t->cols)
				printf("%s\n", cell);
			else
				printf("%-*s  ", (int)width[c], cell);
		}
	}
}
