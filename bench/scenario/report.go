// Package scenario runs the comparison scenarios of docs/benchmarks.md
// against every adapter of package peers and renders the results as
// markdown tables. cmd/compare is its command-line front end.
package scenario

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Table is one result table: a title, a header, rows, and notes printed
// under it.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// Markdown writes t as a level-3 heading, a pipe table and its notes.
func (t Table) Markdown(w io.Writer) {
	fmt.Fprintf(w, "### %s\n\n", t.Title)
	fmt.Fprintf(w, "| %s |\n", strings.Join(t.Header, " | "))
	seps := make([]string, len(t.Header))
	for i := range seps {
		seps[i] = "---"
		if i > 0 {
			seps[i] = "--:"
		}
	}
	fmt.Fprintf(w, "|%s|\n", strings.Join(seps, "|"))
	for _, r := range t.Rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
	}
	fmt.Fprintln(w)
	for _, n := range t.Notes {
		fmt.Fprintf(w, "%s\n\n", n)
	}
}

// Mode says where the run's deadline is set in scenarios 1 to 4.
type Mode int

const (
	// ModeContext: the caller's context carries the deadline, and the
	// library's own overall limit is set to the budget too.
	ModeContext Mode = iota
	// ModeLibrary: only the library's own overall limit is set; the
	// caller's context has no deadline.
	ModeLibrary
)

// String returns the mode's label in the tables.
func (m Mode) String() string {
	if m == ModeContext {
		return "ctx"
	}
	return "lib"
}

// Modes lists both modes.
var Modes = []Mode{ModeContext, ModeLibrary}

// Options sizes a real-time scenario.
type Options struct {
	Runs     int // repetitions per library and mode
	Parallel int // runs in flight at once
}

// RunAll runs jobs with at most parallel in flight, in order of start, and
// returns when all have finished.
func RunAll(parallel int, jobs []func()) {
	parallel = max(parallel, 1)
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for _, j := range jobs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			j()
		})
	}
	wg.Wait()
}

// Durations summarises a sample of durations.
type Durations []time.Duration

// Quantile returns the q-quantile (nearest rank), 0 for an empty sample.
func (d Durations) Quantile(q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(q*float64(len(s))+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// Max returns the largest value, 0 for an empty sample.
func (d Durations) Max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

// ms formats d in milliseconds with one decimal (two below 10ms).
func ms(d time.Duration) string {
	v := float64(d) / float64(time.Millisecond)
	if v > -10 && v < 10 {
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.0f ms", v)
}

// ints summarises a sample of counts.
type ints []int

func (s ints) median() int {
	if len(s) == 0 {
		return 0
	}
	c := slices.Clone(s)
	slices.Sort(c)
	return c[(len(c)-1)/2]
}

func (s ints) max() int {
	if len(s) == 0 {
		return 0
	}
	return slices.Max(s)
}

func (s ints) sum() int {
	t := 0
	for _, v := range s {
		t += v
	}
	return t
}

// P99Runs is the smallest sample for which a p99 is printed; below it the
// tables give the maximum, which bounds the p99 from above.
const P99Runs = 100

// tail returns the label and value of the tail statistic of d: p99 when
// there are enough runs, else the maximum.
func tail(d Durations) (string, time.Duration) {
	if len(d) >= P99Runs {
		return "p99", d.Quantile(0.99)
	}
	return "max", d.Max()
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}
