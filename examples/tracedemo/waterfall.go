package main

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/deadlinebudget/budget/deadline"
)

// barWidth is the number of columns the time axis spans: the whole budget.
const barWidth = 56

// The marks drawn on the time axis.
const (
	markUsed   = '#' // the attempt ran
	markLeased = '-' // granted to the attempt but not used
	markWait   = '~' // a backoff sleep
	markStop   = 'x' // a refusal, or a wait that did not fit
)

// ANSI colours, used only when the output is a terminal and NO_COLOR is
// unset.
const (
	ansiReset  = "\x1b[0m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiDim    = "\x1b[2m"
)

// painter writes text, in colour or not.
type painter struct{ color bool }

func (p painter) paint(code, s string) string {
	if !p.color || code == "" || s == "" {
		return s
	}
	return code + s + ansiReset
}

// verdictColor is green for ok, yellow for a caller's cancellation, red
// for every other verdict.
func verdictColor(v deadline.Verdict) string {
	switch v {
	case deadline.VerdictOK:
		return ansiGreen
	case deadline.VerdictCanceled:
		return ansiYellow
	}
	return ansiRed
}

// cell is one column of a bar: a mark and its colour.
type cell struct {
	mark  rune
	color string
}

// bar is one row of the time axis, spanning [0, budget].
type bar struct {
	budget time.Duration
	cells  [barWidth]cell
}

func newBar(budget time.Duration) *bar {
	b := &bar{budget: budget}
	for i := range b.cells {
		b.cells[i] = cell{mark: ' '}
	}
	return b
}

// col returns the column boundary nearest to instant t: an interval
// [from, to) covers the columns from col(from) up to col(to).
func (b *bar) col(t time.Duration) int {
	if b.budget <= 0 || t <= 0 {
		return 0
	}
	c := (int64(t)*barWidth + int64(b.budget)/2) / int64(b.budget)
	return int(min(int64(barWidth), c))
}

// span marks [from, to) with c, at least one column wide. Columns already
// marked are left alone unless overwrite is set.
func (b *bar) span(from, to time.Duration, c cell, overwrite bool) {
	lo, hi := b.col(from), b.col(to)
	if lo >= barWidth {
		lo = barWidth - 1
	}
	if hi <= lo {
		hi = lo + 1
	}
	for i := lo; i < hi; i++ {
		if overwrite || b.cells[i].mark == ' ' {
			b.cells[i] = c
		}
	}
}

// render returns the bar between two axis marks.
func (b *bar) render(p painter) string {
	var sb strings.Builder
	sb.WriteByte('|')
	for i := 0; i < barWidth; {
		j := i
		for j < barWidth && b.cells[j] == b.cells[i] {
			j++
		}
		sb.WriteString(p.paint(b.cells[i].color, strings.Repeat(string(b.cells[i].mark), j-i)))
		i = j
	}
	sb.WriteByte('|')
	return sb.String()
}

// fmtDur formats d rounded to the millisecond: "12ms", "1.5s", "0ms".
func fmtDur(d time.Duration) string {
	r := d.Round(time.Millisecond)
	switch {
	case r == 0 && d > 0:
		return "<1ms"
	case r == 0:
		return "0ms"
	}
	return r.String()
}

// plural returns "1 attempt", "2 attempts".
func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// The text columns left of the time axis: step, try, lease (or wait),
// used, how it ended.
const (
	colStep = iota
	colTry
	colLease
	colUsed
	colEnded
	columns
)

// minWidths are the text columns' least widths; a column is widened to its
// longest cell ("gRPC ResourceExhausted"), so that the bars stay aligned.
var minWidths = [columns]int{8, 5, 18, 6, 16}

// waterfallRow is one line of the waterfall: its text columns and its bar.
type waterfallRow struct {
	cells [columns]string
	bar   string
}

// writeRows writes rows with each text column as wide as its longest cell
// (at least minWidths), one space after each.
func writeRows(sb *strings.Builder, rows []waterfallRow) {
	widths := minWidths
	for _, r := range rows {
		for i, c := range r.cells {
			widths[i] = max(widths[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		for i, c := range r.cells {
			sb.WriteString(c)
			sb.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c)+1))
		}
		sb.WriteString(r.bar)
		sb.WriteByte('\n')
	}
}

// axis returns the header above the bars: tick labels at round values (a
// step of 1, 2 or 5 times a power of ten cutting the budget into at most 5
// parts), each centred on its column, from 0 to the budget.
func axis(budget time.Duration) string {
	line := []byte(strings.Repeat(" ", barWidth+2))
	step := tickStep(budget)
	if step <= 0 {
		copy(line, "0ms")
		return strings.TrimRight(string(line), " ")
	}
	for t := time.Duration(0); t <= budget; t += step {
		label := fmtDur(t)
		pos := 1 + int((int64(t)*barWidth+int64(budget)/2)/int64(budget)) - len(label)/2 // the bar starts after the '|'
		pos = max(0, min(pos, len(line)-len(label)))
		copy(line[pos:], label)
	}
	return strings.TrimRight(string(line), " ")
}

// tickStep is the smallest round step (1, 2 or 5 times a power of ten)
// that cuts [0, budget] into at most 5 parts; 0 for no budget.
func tickStep(budget time.Duration) time.Duration {
	if budget <= 0 {
		return 0
	}
	for p := time.Duration(1); ; p *= 10 {
		for _, m := range []time.Duration{1, 2, 5} {
			if m*p*5 >= budget {
				return m * p
			}
		}
	}
}

// endedText says how an attempt ended: its HTTP status for a retryable
// failure, or its gRPC code, else the engine's ended_by.
func endedText(a attemptRecord) string {
	if a.Status != 0 {
		return fmt.Sprintf("HTTP %d", a.Status)
	}
	if a.Code != "" {
		return "gRPC " + a.Code
	}
	return a.EndedBy.String()
}

// notRun stands in the verdict column for a step that was never started.
const notRun = "not_run"

// writeWaterfall writes the run as a waterfall: one row per attempt, wait and
// refusal on one time axis spanning the budget, an empty row for each step
// never started, then each step's verdict and stop reason.
func writeWaterfall(w io.Writer, r runRecord, color bool) error {
	p := painter{color: color}
	var sb strings.Builder
	fmt.Fprintf(&sb, "scenario %s · budget %s · floor %s · seed %d\n", r.Scenario, fmtDur(r.Budget), fmtDur(r.Floor), r.Seed)
	if r.About != "" {
		fmt.Fprintln(&sb, r.About)
	}
	fmt.Fprintln(&sb, p.paint(ansiDim, fmt.Sprintf("%c used  %c leased, unused  %c backoff wait  %c refused or stopped", markUsed, markLeased, markWait, markStop)))
	rows := []waterfallRow{{cells: [columns]string{"step", "try", "lease", "used", "ended"}, bar: axis(r.Budget)}}
	for _, c := range r.Calls {
		name := c.Name
		waits := c.Waits
		for _, a := range c.Attempts {
			b := newBar(r.Budget)
			good := ansiRed
			if a.EndedBy == deadline.EndedCompleted {
				good = ansiGreen
			}
			b.span(a.Start, a.Start+a.Used, cell{markUsed, good}, true)
			if a.Granted > a.Used {
				b.span(a.Start+a.Used, a.Start+a.Granted, cell{markLeased, ansiDim}, false)
			}
			lease := fmt.Sprintf("%s %s", fmtDur(a.Granted), a.LimitedBy)
			rows = append(rows, waterfallRow{[columns]string{name, fmt.Sprintf("#%d", a.Number), lease, fmtDur(a.Used), endedText(a)}, b.render(p)})
			name = ""
			for len(waits) > 0 && waits[0].After == a.Number {
				wt := waits[0]
				waits = waits[1:]
				b := newBar(r.Budget)
				src := "backoff"
				if wt.Source == deadline.SourceRetryAfter {
					src = "retry-after"
				}
				ended := ""
				if wt.Fits {
					b.span(wt.Start, wt.Start+wt.Delay, cell{markWait, ansiYellow}, true)
				} else {
					b.span(wt.Start, wt.Start, cell{markStop, ansiRed}, true)
					ended = fmt.Sprintf("> %s left", fmtDur(wt.Remaining-r.Floor))
				}
				rows = append(rows, waterfallRow{[columns]string{"", "wait", fmt.Sprintf("%s %s", fmtDur(wt.Delay), src), "", ended}, b.render(p)})
			}
		}
		if c.Reason == deadline.ReasonRefused {
			b := newBar(r.Budget)
			b.span(c.End, c.End, cell{markStop, ansiRed}, true)
			rows = append(rows, waterfallRow{[columns]string{name, "-", "refused", "", fmt.Sprintf("%s left", fmtDur(c.Left))}, b.render(p)})
		}
	}
	for _, n := range r.NotRun {
		rows = append(rows, waterfallRow{[columns]string{n.Name, "-", "not run", "", ""}, newBar(r.Budget).render(p)})
	}
	writeRows(&sb, rows)
	sb.WriteByte('\n')
	for _, c := range r.Calls {
		fmt.Fprintf(&sb, "%-8s %s %s\n", c.Name, p.paint(verdictColor(c.Verdict), fmt.Sprintf("%-18s", string(c.Verdict))), stopText(c))
	}
	for _, n := range r.NotRun {
		fmt.Fprintf(&sb, "%-8s %s not started: the plan stopped at %s (%s, not a budget stop)\n", n.Name, p.paint(ansiDim, fmt.Sprintf("%-18s", notRun)), n.After, n.Cause)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// stopText says why a call stopped, after how many attempts, and what the
// deadline did to it.
func stopText(c callRecord) string {
	s := fmt.Sprintf("%s after %s", c.Reason, plural(c.Started, "attempt"))
	if c.Started > 1 {
		s += fmt.Sprintf(" (%s)", plural(c.Started-1, "resend"))
	}
	switch c.Reason {
	case deadline.ReasonRefused:
		s += fmt.Sprintf(": %s left, not above the %s floor", fmtDur(c.Left), fmtDur(floor))
	case deadline.ReasonDeadline:
		if n := len(c.Attempts); n > 0 {
			a := c.Attempts[n-1]
			s += fmt.Sprintf(": lease cut to %s (ceiling %s), then ended by the deadline", fmtDur(a.Granted), fmtDur(c.Ceiling))
		}
	case deadline.ReasonRetryAfterTooLong, deadline.ReasonBackoffTooLong:
		if n := len(c.Waits); n > 0 {
			wt := c.Waits[n-1]
			s += fmt.Sprintf(": asked to wait %s with %s left above the floor", fmtDur(wt.Delay), fmtDur(wt.Remaining-floor))
		}
	case deadline.ReasonExhausted:
		var ceiling int
		for _, a := range c.Attempts {
			if a.EndedBy == deadline.EndedAttemptTimeout {
				ceiling++
			}
		}
		if ceiling > 0 {
			s += fmt.Sprintf(": %s ran the whole %s ceiling", plural(ceiling, "attempt"), fmtDur(c.Ceiling))
		}
	}
	return s
}

// writeSummary writes the one-line summary: budget, used, left, and each
// step's verdict (not_run for a step never started).
func writeSummary(w io.Writer, r runRecord, color bool) error {
	p := painter{color: color}
	var v []string
	for _, c := range r.Calls {
		v = append(v, c.Name+"="+p.paint(verdictColor(c.Verdict), string(c.Verdict)))
	}
	for _, n := range r.NotRun {
		v = append(v, n.Name+"="+p.paint(ansiDim, notRun))
	}
	if len(v) == 0 {
		v = append(v, "none")
	}
	_, err := fmt.Fprintf(w, "budget %s · used %s · left %s · verdicts %s\n",
		fmtDur(r.Budget), fmtDur(r.Used), fmtDur(r.Left), strings.Join(v, " "))
	return err
}
