package budgetprop_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/deadlinebudget/budget/otelbudget/budgetprop"
)

// FuzzExtract feeds arbitrary field values, as single values and as HTTP
// header lines, to Extract and Consume on an arbitrary wall clock: never a
// panic, never more than the maximum, never a negative budget, and a
// refusal exactly when nothing (or no more than the floor) is left.
func FuzzExtract(f *testing.F) {
	f.Add("870", "1764600000870", int64(1_764_600_000_000))
	f.Add("0", "", int64(0))
	f.Add("-5", "99999999999999999", int64(-1))
	f.Add("1, 2, x", "1,1764600000870", int64(1<<62))
	f.Add("9999999999", "999999999999999", int64(999_999_999_999_999))
	const maxBudget, floor = 10 * time.Second, 5 * time.Millisecond
	f.Fuzz(func(t *testing.T, budget, expiry string, nowMs int64) {
		now := time.UnixMilli(nowMs)
		p, err := budgetprop.New(budgetprop.WithClock(func() time.Time { return now }),
			budgetprop.WithMaxBudget(maxBudget), budgetprop.WithFloor(floor))
		if err != nil {
			t.Fatal(err)
		}
		check := func(x budgetprop.Extraction) {
			a := x.Admission
			if a.Budget > maxBudget || a.Budget < 0 {
				t.Fatalf("budget %v out of [0, %v] for %q, %q at %d", a.Budget, maxBudget, budget, expiry, nowMs)
			}
			if x.Usable() && a.Refused() != (a.Budget <= floor) {
				t.Fatalf("refusal %v with budget %v", a.Refusal, a.Budget)
			}
		}
		for _, c := range []propagation.TextMapCarrier{
			propagation.MapCarrier{budgetprop.FieldBudget: budget, budgetprop.FieldExpiry: expiry},
			propagation.HeaderCarrier(http.Header{"Deadline-Budget-Ms": {budget, expiry}, "Deadline-Expiry-Unix-Ms": {expiry}}),
		} {
			if x, ok := budgetprop.FromContext(p.Extract(context.Background(), c)); ok {
				check(x)
			}
			ran := false
			err := p.Consume(context.Background(), c, func(ctx context.Context) error {
				ran = true
				x, _ := budgetprop.FromContext(ctx)
				check(x)
				return nil
			})
			if ran == (err != nil) {
				t.Fatalf("handle ran %v, error %v", ran, err)
			}
		}
	})
}
