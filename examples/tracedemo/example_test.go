package main

import (
	"os"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// The waterfall of a recorded run of the tight scenario: a 110ms budget in
// which fetch's lease is cut by the deadline to 80ms, less than the 90ms its
// provider needs, the deadline ends it, and extract is then refused: the
// 20ms left are the floor.
func Example_waterfall() {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rec := runRecord{
		Scenario: "tight", Seed: 7, Budget: ms(110), Floor: ms(20),
		Calls: []callRecord{
			{Name: "search", Ceiling: ms(250), MaxAttempts: 2, Reason: deadline.ReasonSuccess, Verdict: deadline.VerdictOK, Started: 1, End: ms(10), Left: ms(100),
				Attempts: []attemptRecord{{Number: 1, Granted: ms(90), LimitedBy: deadline.LimitDeadline, Used: ms(10), EndedBy: deadline.EndedCompleted}}},
			{Name: "fetch", Start: ms(10), Ceiling: ms(100), MaxAttempts: 3, Reason: deadline.ReasonDeadline, Verdict: deadline.VerdictDeadlineTooSmall, Started: 1, End: ms(90), Left: ms(20),
				Attempts: []attemptRecord{{Number: 1, Start: ms(10), Granted: ms(80), LimitedBy: deadline.LimitDeadline, Used: ms(80), EndedBy: deadline.EndedDeadline}}},
			{Name: "extract", Start: ms(90), Ceiling: ms(250), MaxAttempts: 2, Reason: deadline.ReasonRefused, Verdict: deadline.VerdictDeadlineTooSmall, End: ms(90), Left: ms(20)},
		},
		Used: ms(90), Left: ms(20),
	}
	_ = writeWaterfall(os.Stdout, rec, false)
	_ = writeSummary(os.Stdout, rec, false)
	// Output:
	// scenario tight · budget 110ms · floor 20ms · seed 7
	// # used  - leased, unused  ~ backoff wait  x refused or stopped
	// step     try   lease              used   ended            0ms                     50ms                      100ms
	// search   #1    90ms deadline      10ms   completed        |#####-----------------------------------------          |
	// fetch    #1    80ms deadline      80ms   deadline         |     #########################################          |
	// extract  -     refused                   20ms left        |                                              x         |
	//
	// search   ok                 success after 1 attempt
	// fetch    deadline_too_small deadline_exceeded after 1 attempt: lease cut to 80ms (ceiling 100ms), then ended by the deadline
	// extract  deadline_too_small refused after 0 attempts: 20ms left, not above the 20ms floor
	// budget 110ms · used 90ms · left 20ms · verdicts search=ok fetch=deadline_too_small extract=deadline_too_small
}
