package truthtest_test

import (
	"fmt"
	"time"

	"github.com/deadlinebudget/budget/otelbudget/truthtest"
)

// The known-truth data set, and what it says about fetch before any tool
// reads it: how many attempts its 100ms ceiling cut.
func Example() {
	var runs []truthtest.Run
	for _, s := range truthtest.KnownTruth(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)) {
		rs, err := s.Runs()
		if err != nil {
			fmt.Println(err)
			return
		}
		runs = append(runs, rs...)
	}
	var attempts, cut int
	for _, r := range runs {
		for _, c := range r.Calls {
			if c.Step != "fetch" {
				continue
			}
			for _, a := range c.Attempts {
				attempts++
				if a.Cut() {
					cut++
				}
			}
		}
	}
	fmt.Printf("%d runs, %s to %s\n", len(runs), runs[0].Start.Format(time.TimeOnly), runs[len(runs)-1].End().Format(time.TimeOnly))
	fmt.Printf("fetch: %d attempts, %d cut (%.1f%%)\n", attempts, cut, 100*float64(cut)/float64(attempts))
	// Output:
	// 3000 runs, 09:00:00 to 09:49:59
	// fetch: 3423 attempts, 349 cut (10.2%)
}

// A set that cannot be generated is an error, never a panic.
func ExampleSet_Runs_invalid() {
	plan := truthtest.Plan()
	plan[1].MaxAttempts = 0
	_, err := truthtest.Set{Instance: "agent", N: 10, Plan: plan}.Runs()
	fmt.Println(err)
	// Output:
	// truthtest: invalid set: step "fetch": MaxAttempts 0: want 1 to 32
}
