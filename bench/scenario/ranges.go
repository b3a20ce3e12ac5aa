package scenario

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// number matches the figures of a cell: an optional sign (+, - or −), digits, an
// optional fraction.
var number = regexp.MustCompile(`[-+−]?\d+(?:\.\d+)?`)

// MergeRanges folds the tables of several runs of the same scenarios into
// one set: each cell (and each note) that differs across the runs shows the
// range of every figure in it, "min–max", where the runs agree on the text
// around the figures; otherwise the distinct texts in order, joined by " / "
// (a goal met in one run and missed in another reads "met / **missed**").
// A cell the runs agree on is kept as is. runs[i] is the i-th run's tables;
// every run must hold the same tables, in the same order, with the same
// shape.
func MergeRanges(runs [][]Table) ([]Table, error) {
	if len(runs) == 0 {
		return nil, nil
	}
	first := runs[0]
	for i, r := range runs[1:] {
		if len(r) != len(first) {
			return nil, fmt.Errorf("scenario: run %d has %d tables, run 1 has %d", i+2, len(r), len(first))
		}
	}
	out := make([]Table, len(first))
	for ti, t := range first {
		m := Table{Title: t.Title, Header: t.Header}
		same := make([]Table, len(runs))
		for ri, r := range runs {
			same[ri] = r[ti]
			if r[ti].Title != t.Title || len(r[ti].Rows) != len(t.Rows) || len(r[ti].Notes) != len(t.Notes) {
				return nil, fmt.Errorf("scenario: run %d's table %d (%q) does not have the shape of run 1's (%q)", ri+1, ti+1, r[ti].Title, t.Title)
			}
		}
		for rowi, row := range t.Rows {
			merged := make([]string, len(row))
			for ci := range row {
				var cells []string
				for _, r := range same {
					if ci >= len(r.Rows[rowi]) {
						return nil, fmt.Errorf("scenario: table %q row %d is shorter in one run", t.Title, rowi+1)
					}
					cells = append(cells, r.Rows[rowi][ci])
				}
				merged[ci] = mergeCell(cells)
			}
			m.Rows = append(m.Rows, merged)
		}
		for ni := range t.Notes {
			var notes []string
			for _, r := range same {
				notes = append(notes, r.Notes[ni])
			}
			m.Notes = append(m.Notes, mergeCell(notes))
		}
		out[ti] = m
	}
	return out, nil
}

// mergeCell merges one cell's texts across runs (see MergeRanges).
func mergeCell(cells []string) string {
	if len(cells) == 0 {
		return ""
	}
	if u := uniqueInOrder(cells); len(u) == 1 {
		return u[0]
	}
	skeleton := number.ReplaceAllString(cells[0], "#")
	figures := make([][]string, len(cells))
	for i, c := range cells {
		if number.ReplaceAllString(c, "#") != skeleton {
			return strings.Join(uniqueInOrder(cells), " / ")
		}
		figures[i] = number.FindAllString(c, -1)
	}
	k := 0
	return number.ReplaceAllStringFunc(cells[0], func(string) string {
		lo, hi := figures[0][k], figures[0][k]
		for _, f := range figures {
			if value(f[k]) < value(lo) {
				lo = f[k]
			}
			if value(f[k]) > value(hi) {
				hi = f[k]
			}
		}
		k++
		switch {
		case value(lo) == value(hi):
			return lo
		case strings.HasPrefix(lo, "-") || strings.HasPrefix(lo, "−"):
			return lo + " to " + hi
		}
		return lo + "–" + hi
	})
}

func value(s string) float64 {
	v, _ := strconv.ParseFloat(strings.Replace(s, "−", "-", 1), 64)
	return v
}

func uniqueInOrder(s []string) []string {
	var out []string
	for _, v := range s {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
