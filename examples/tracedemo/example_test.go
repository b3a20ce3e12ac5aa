package main

import (
	"os"
	"time"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/otelbudget"
)

// The waterfall of a recorded run: a 300ms budget in which fetch's first
// attempt hangs for its whole 100ms ceiling and extract's lease is cut by
// the deadline, which then ends it.
func Example_waterfall() {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	rec := runRecord{
		Scenario: "tight", Seed: 7, Budget: ms(300), Floor: ms(20),
		Calls: []callRecord{
			{Name: "search", Ceiling: ms(250), MaxAttempts: 2, Reason: deadline.ReasonSuccess, Verdict: otelbudget.VerdictOK, Started: 1,
				Attempts: []attemptRecord{{Number: 1, Granted: ms(250), LimitedBy: deadline.LimitCeiling, Used: ms(10), EndedBy: deadline.EndedCompleted}}},
			{Name: "fetch", Start: ms(10), Ceiling: ms(100), MaxAttempts: 3, Reason: deadline.ReasonSuccess, Verdict: otelbudget.VerdictOK, Started: 2,
				Attempts: []attemptRecord{
					{Number: 1, Start: ms(10), Granted: ms(100), LimitedBy: deadline.LimitCeiling, Used: ms(100), EndedBy: deadline.EndedAttemptTimeout},
					{Number: 2, Start: ms(140), Granted: ms(100), LimitedBy: deadline.LimitCeiling, Used: ms(10), EndedBy: deadline.EndedCompleted},
				},
				Waits: []waitRecord{{After: 1, Start: ms(110), Delay: ms(30), Source: deadline.SourcePolicy, Remaining: ms(190), Fits: true}}},
			{Name: "extract", Start: ms(150), Ceiling: ms(250), MaxAttempts: 2, Reason: deadline.ReasonDeadline, Verdict: otelbudget.VerdictDeadlineTooSmall, Started: 1, End: ms(280), Left: ms(20),
				Attempts: []attemptRecord{{Number: 1, Start: ms(150), Granted: ms(130), LimitedBy: deadline.LimitDeadline, Used: ms(130), EndedBy: deadline.EndedDeadline}}},
		},
		Used: ms(280), Left: ms(20),
	}
	_ = writeWaterfall(os.Stdout, rec, false)
	_ = writeSummary(os.Stdout, rec, false)
	// Output:
	// scenario tight · budget 300ms · floor 20ms · seed 7
	// # used  - leased, unused  ~ backoff wait  x refused or stopped
	// step     try   lease              used   ended            0ms          75ms          150ms         225ms       300ms
	// search   #1    250ms ceiling      10ms   completed        |##---------------------------------------------         |
	// fetch    #1    100ms ceiling      100ms  attempt_timeout  |  ###################                                   |
	//          wait  30ms backoff                               |                     ~~~~~                              |
	//          #2    100ms ceiling      10ms   completed        |                          ##-----------------           |
	// extract  #1    130ms deadline     130ms  deadline         |                            ########################    |
	//
	// search   ok                 success after 1 attempt
	// fetch    ok                 success after 2 attempts (1 resend)
	// extract  deadline_too_small deadline_exceeded after 1 attempt: lease cut to 130ms (ceiling 250ms), then ended by the deadline
	// budget 300ms · used 280ms · left 20ms · verdicts search=ok fetch=ok extract=deadline_too_small
}
