package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/genai"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetgenkit"
)

// barWidth is the number of columns the time axis spans: the whole budget.
const barWidth = 56

// The marks drawn on the time axis.
const (
	markUsed   = '#' // the span ran
	markLeased = '-' // leased to the call but not used
	markCut    = 'x' // abandoned at its lease's end
)

// writeWaterfall draws the run's GenAI spans (invoke_agent, chat,
// execute_tool) on one time axis of budget: each row the span's time, its
// unused lease, and what the budget did to it.
func writeWaterfall(w io.Writer, spans []sdktrace.ReadOnlySpan, budget time.Duration) error {
	var rows []sdktrace.ReadOnlySpan
	var origin time.Time
	for _, s := range spans {
		a := attrs(s)
		switch a[genai.OperationNameKey].AsString() {
		case genai.OperationInvokeAgent:
			origin = s.StartTime()
			rows = append(rows, s)
		case genai.OperationChat, genai.OperationExecuteTool:
			rows = append(rows, s)
		}
	}
	if origin.IsZero() {
		return fmt.Errorf("no invoke_agent span among the %d recorded", len(spans))
	}
	slices.SortStableFunc(rows, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	col := func(t time.Time) int {
		c := int(int64(t.Sub(origin)) * barWidth / int64(budget))
		return max(0, min(c, barWidth-1))
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-26s %s\n", "", axis(budget))
	for _, s := range rows {
		a := attrs(s)
		bar := []rune(strings.Repeat(" ", barWidth))
		from, to := col(s.StartTime()), col(s.EndTime())
		if g, ok := a[otelbudget.AttrAttemptGrantedMs]; ok {
			lease := col(s.StartTime().Add(time.Duration(g.AsInt64()) * time.Millisecond))
			for i := to; i <= lease; i++ {
				bar[i] = markLeased
			}
		}
		for i := from; i <= to; i++ {
			bar[i] = markUsed
		}
		note := ""
		switch {
		case a[otelbudgetgenkit.AttrToolAbandoned].AsBool():
			bar[to] = markCut
			note = "abandoned at its lease"
		case a[otelbudgetgenkit.AttrReserveFinal].AsBool():
			note = "final call, from the reserve"
		case a[otelbudgetgenkit.AttrReserveAnswered].AsBool():
			note = "answered from the reserve"
		}
		if id := a[genai.ToolCallIDKey].AsString(); id != "" {
			note = strings.TrimSpace(id + " " + note)
		}
		name := s.Name()
		if len(name) > 26 {
			name = name[:26]
		}
		fmt.Fprintf(&sb, "%-26s |%s| %7s %s\n", name, string(bar), s.EndTime().Sub(s.StartTime()).Round(time.Millisecond), note)
	}
	fmt.Fprintf(&sb, "%-26s  %c ran  %c leased, unused  %c abandoned\n", "", markUsed, markLeased, markCut)
	_, err := io.WriteString(w, sb.String())
	return err
}

// axis is the time axis: 0 at the left, the budget (the deadline) at the
// right.
func axis(budget time.Duration) string {
	left, right := "0", budget.String()+" (deadline)"
	return " " + left + strings.Repeat(" ", max(1, barWidth-len(left)-len(right)+1)) + right
}

func attrs(s sdktrace.ReadOnlySpan) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes() {
		m[kv.Key] = kv.Value
	}
	return m
}
