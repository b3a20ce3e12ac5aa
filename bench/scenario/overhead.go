package scenario

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/bench/peers"
	"github.com/deadlinebudget/budget/deadline"
)

// nop is the operation of scenario 7: it succeeds at once.
func nop(context.Context) error { return nil }

// OverheadResult is one row of scenario 7.
type OverheadResult struct {
	Name        string
	NsPerOp     float64
	AllocsPerOp int64
	BytesPerOp  int64
}

func result(name string, r testing.BenchmarkResult) OverheadResult {
	return OverheadResult{Name: name, NsPerOp: float64(r.T.Nanoseconds()) / float64(max(r.N, 1)),
		AllocsPerOp: r.AllocsPerOp(), BytesPerOp: r.AllocedBytesPerOp()}
}

// Bare is the reference of scenario 7: the operation called once under
// context.WithDeadline, what every library's success path must at least do.
func Bare(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		c, cancel := context.WithDeadline(ctx, time.Now().Add(time.Second))
		_ = nop(c)
		cancel()
	}
}

// DeadlineDirect calls deadline.Do as a user would, without the harness's
// adapter (which wraps op in a closure that translates errors).
func DeadlineDirect(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	p := peers.Deadline{}.Policy(peers.Scenario1())
	op := func(ctx context.Context, _ deadline.AttemptInfo) (struct{}, error) { return struct{}{}, nop(ctx) }
	for b.Loop() {
		_, _ = deadline.Do(ctx, deadline.New(time.Second), p, op)
	}
}

// Adapter measures one library through its adapter, in mode lib (the
// library's own limits, no deadline on the context).
func Adapter(r peers.Retrier) func(*testing.B) {
	return func(b *testing.B) {
		b.ReportAllocs()
		ctx := context.Background()
		c := peers.Scenario1()
		for b.Loop() {
			if err := r.Do(ctx, c, nop); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// PerCallForms are the peers configured against their docs' advice, their
// policies rebuilt in every call, measured by scenario 7 next to their
// recommended (reused) form to show what the reuse saves. They take no part
// in the goal's comparison.
var PerCallForms = []peers.Retrier{peers.Failsafe{PerCall: true}}

func isPerCallForm(name string) bool {
	return slices.ContainsFunc(PerCallForms, func(r peers.Retrier) bool { return r.Name() == name })
}

// Overhead runs scenario 7 with testing.Benchmark: the bare call, this
// project called directly, then every adapter, rounds times in turn, and
// keeps each benchmark's median ns/op (allocations do not vary). Taking
// turns spreads the machine's noise over every row alike.
func Overhead(rs []peers.Retrier, rounds int) []OverheadResult {
	benches := []struct {
		name string
		f    func(*testing.B)
	}{
		{"bare call under context.WithDeadline", Bare},
		{"deadline (this), deadline.Do called directly", DeadlineDirect},
	}
	add := func(r peers.Retrier) {
		benches = append(benches, struct {
			name string
			f    func(*testing.B)
		}{r.Name(), Adapter(r)})
	}
	for _, r := range rs {
		add(r)
		for _, pc := range PerCallForms { // right under its recommended form
			if fmt.Sprintf("%T", pc) == fmt.Sprintf("%T", r) {
				add(pc)
			}
		}
	}
	samples := make([][]OverheadResult, len(benches))
	for range max(rounds, 1) {
		for i, b := range benches {
			samples[i] = append(samples[i], result(b.name, testing.Benchmark(b.f)))
		}
	}
	out := make([]OverheadResult, len(benches))
	for i, s := range samples {
		slices.SortFunc(s, func(a, b OverheadResult) int { return cmp.Compare(a.NsPerOp, b.NsPerOp) })
		out[i] = s[(len(s)-1)/2]
	}
	return out
}

// OverheadTable renders scenario 7.
func OverheadTable(res []OverheadResult) Table {
	t := Table{
		Title:  "Scenario 7: overhead of a call that succeeds on its first attempt (testing.Benchmark, -benchmem)",
		Header: []string{"library", "ns/op", "× bare", "allocs/op", "B/op", "goal"},
	}
	bare := res[0]
	var this, thisDirect OverheadResult
	bestPeerNs, bestPeerAllocs := -1.0, int64(-1)
	for _, r := range res {
		switch r.Name {
		case peers.Deadline{}.Name():
			this = r
		case res[1].Name:
			thisDirect = r
		case bare.Name, peers.Baseline{}.Name():
		default:
			if isPerCallForm(r.Name) {
				continue
			}
			if bestPeerNs < 0 || r.NsPerOp < bestPeerNs {
				bestPeerNs = r.NsPerOp
			}
			if bestPeerAllocs < 0 || r.AllocsPerOp < bestPeerAllocs {
				bestPeerAllocs = r.AllocsPerOp
			}
		}
	}
	for _, r := range res {
		goal := "—"
		if r.Name == this.Name || r.Name == thisDirect.Name {
			goal = fmt.Sprintf("fewer ns and allocs than every peer library: %s; ≤ 1.2× bare: %s; ≤ bare + 2 allocs: %s",
				verdict(r.NsPerOp < bestPeerNs && r.AllocsPerOp < bestPeerAllocs),
				verdict(r.NsPerOp <= 1.2*bare.NsPerOp), verdict(r.AllocsPerOp <= bare.AllocsPerOp+2))
		}
		t.Rows = append(t.Rows, []string{r.Name, fmt.Sprintf("%.0f", r.NsPerOp), fmt.Sprintf("%.2f", r.NsPerOp/bare.NsPerOp),
			fmt.Sprint(r.AllocsPerOp), fmt.Sprint(r.BytesPerOp), goal})
	}
	t.Notes = append(t.Notes, "ns/op is the median of the rounds; the hand-written loop is not a peer library and is left out of the goal's comparison, "+
		"as are the rows marked “rebuilt per call”, which build the library's policies inside every call against its docs' advice "+
		"(the row above each is the recommended form: built once, reused). "+
		"Each library row goes through its adapter with the scenario-1 policy and no deadline on the context "+
		"(each call sets its own limits, as the bare call sets its deadline); the adapter's work (per-attempt context.WithTimeout "+
		"where the library has no per-attempt timeout of its own, error translation) is part of what a user writes and is counted.")
	return t
}
