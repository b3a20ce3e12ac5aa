package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// The article's settings, shared by every step of the plan.
const (
	floor       = 20 * time.Millisecond
	backoffBase = 50 * time.Millisecond
	backoffMax  = 400 * time.Millisecond

	// defaultBudget is the run's budget unless a scenario or -budget says
	// otherwise: the article's one second.
	defaultBudget = time.Second
	// defaultSeed seeds the backoff jitter, as the article's random.Random(7).
	defaultSeed = 7

	// workSearch, workFetch and workExtract are how long each provider
	// works on a request that it answers normally. The article's operations
	// take 10ms; extraction (the model call) is made slower here, so that it
	// is the heavy bar of the waterfall (its 250ms ceiling still fits it with
	// room to spare).
	workSearch  = 10 * time.Millisecond
	workFetch   = 10 * time.Millisecond
	workExtract = 150 * time.Millisecond

	// workFetchTight is how long the fetch provider takes in the tight
	// scenario: within fetch's 100ms ceiling, so that only the budget can
	// be too small for it.
	workFetchTight = 90 * time.Millisecond
)

// step is one logical call of the agent plan: one HTTP request, retried by
// the budget transport under its own ceiling and attempt limit.
type step struct {
	name     string
	method   string
	path     string
	body     string // sent with an Idempotency-Key, so that it may be retried
	ceiling  time.Duration
	attempts int
}

// agentPlan returns the source article's agent run: search, fetch, extract.
func agentPlan() []step {
	return []step{
		{name: "search", method: http.MethodGet, path: "/search?q=deadline+budget", ceiling: 250 * time.Millisecond, attempts: 2},
		{name: "fetch", method: http.MethodGet, path: "/pages/1", ceiling: 100 * time.Millisecond, attempts: 3},
		{name: "extract", method: http.MethodPost, path: "/extract", body: `{"page":1,"fields":["title","date"]}`, ceiling: 250 * time.Millisecond, attempts: 2},
	}
}

// reply is how a provider answers one request.
type reply struct {
	// hang: wait, without answering, until the request's lease (the budget
	// it arrived with) or its connection ends.
	hang bool
	// work is how long the provider takes before it answers.
	work time.Duration
	// latency, when set, replaces work with a draw from its distribution,
	// one per request (tracedemo -runs).
	latency *sampler
	// status is the response status; 0 means 200 with a JSON body.
	status int
	// retryAfter is the Retry-After value sent with the status, if any.
	retryAfter string
}

// failed reports whether the reply is an error status (anything but 0 and
// 200).
func (r reply) failed() bool { return r.status != 0 && r.status != http.StatusOK }

// script is the sequence of replies a provider gives, one per request it
// receives; the last one repeats.
type script []reply

// at returns the reply to request n (1 for the first).
func (s script) at(n int) reply {
	if len(s) == 0 {
		return reply{}
	}
	return s[min(n, len(s))-1]
}

// expect is what a step must end with for the scenario to have behaved as
// designed.
type expect struct {
	verdict  deadline.Verdict
	reason   deadline.Reason
	attempts int // attempts started
	requests int // requests the provider received
}

// scenario is one way the run can go, reproducible with a seed: how each
// provider behaves, the budget, and what must come out.
type scenario struct {
	name   string
	about  string
	budget time.Duration
	// scripts maps a step name to its provider's replies; a step with no
	// script answers normally after its usual work time.
	scripts map[string]script
	// want lists, in plan order, the steps that must run (a step refused by
	// the budget runs: it gets a verdict) and how each must end; the steps
	// after the last one must not run at all (the plan stopped before them).
	want []stepWant
}

type stepWant struct {
	step string
	expect
}

// normal returns how the provider behind step answers when the scenario
// says nothing else.
func normal(step string) reply {
	switch step {
	case "search":
		return reply{work: workSearch}
	case "fetch":
		return reply{work: workFetch}
	case "extract":
		return reply{work: workExtract}
	}
	return reply{}
}

// script returns the replies of the provider behind step.
func (sc scenario) script(step string) script {
	if s, ok := sc.scripts[step]; ok {
		return s
	}
	return script{normal(step)}
}

// scenarios returns every scenario, in the order the help text lists them.
// It builds them on each call: there is no package-level mutable state.
func scenarios() []scenario {
	ok := func(step string, attempts int) stepWant {
		return stepWant{step, expect{verdict: deadline.VerdictOK, reason: deadline.ReasonSuccess, attempts: attempts, requests: attempts}}
	}
	refused := func(step string) stepWant {
		return stepWant{step, expect{verdict: deadline.VerdictDeadlineTooSmall, reason: deadline.ReasonRefused}}
	}
	return []scenario{
		{
			name:   "ok",
			about:  "the article's run: fetch's first request hangs until its lease ends, the retry succeeds",
			budget: defaultBudget,
			scripts: map[string]script{
				"fetch": {{hang: true}, normal("fetch")},
			},
			want: []stepWant{ok("search", 1), ok("fetch", 2), ok("extract", 1)},
		},
		{
			// 110ms: search takes 10ms, so fetch is granted what is left
			// less the floor, 110-20-10 = 80ms, less than its 100ms ceiling
			// (LimitDeadline) and than the 90ms its provider needs: the
			// deadline, not the provider, ends it, leaving exactly the floor,
			// and extract is then refused. No backoff comes before the cut,
			// so this holds for every seed, and a run that starts late only
			// shortens fetch's lease: the design holds up to some 75ms of
			// delay before fetch, far more than a loaded machine adds.
			// (fetch must not fail on its ceiling first: an attempt that ran
			// its whole ceiling makes the verdict operation_too_slow.)
			name: "tight",
			about: "the budget is too small: fetch's lease is cut by the deadline below the 90ms it needs (its " +
				"ceiling is 100ms), the deadline ends it, then extract is refused below the floor, never sent",
			budget: 110 * time.Millisecond,
			scripts: map[string]script{
				"fetch": {{work: workFetchTight}},
			},
			want: []stepWant{
				ok("search", 1),
				{"fetch", expect{verdict: deadline.VerdictDeadlineTooSmall, reason: deadline.ReasonDeadline, attempts: 1, requests: 1}},
				refused("extract"),
			},
		},
		{
			// Exhausted attempts are the operation's failure, not the
			// budget's: the plan stops there and extract is not run.
			name: "slow",
			about: "the fetch provider takes 150ms, longer than its 100ms ceiling, on every request: " +
				"its attempts are exhausted, the plan stops, extract is not run",
			budget: defaultBudget,
			scripts: map[string]script{
				"fetch": {{work: 150 * time.Millisecond}},
			},
			want: []stepWant{
				ok("search", 1),
				{"fetch", expect{verdict: deadline.VerdictTooSlow, reason: deadline.ReasonExhausted, attempts: 3, requests: 3}},
			},
		},
		{
			// Retry-After counts whole seconds (RFC 9110 delay-seconds), so
			// this scenario needs a budget of a few seconds: 3s leaves room
			// for the first Retry-After (1s) but not for the second (5s).
			// fetch is the step throttled because it may make 3 attempts:
			// the second Retry-After is only weighed if a retry remains.
			// Throttled is a budget stop, so the plan goes on: extract runs
			// in what is left (about 2s), far more than its 250ms ceiling.
			name: "ratelimited",
			about: "fetch answers 429 with Retry-After: 1 (it fits), then Retry-After: 5 (it does not): " +
				"fetch is given up, extract still runs in what is left",
			budget: 3 * time.Second,
			scripts: map[string]script{
				"fetch": {
					{work: workFetch, status: http.StatusTooManyRequests, retryAfter: "1"},
					{work: workFetch, status: http.StatusTooManyRequests, retryAfter: "5"},
				},
			},
			want: []stepWant{
				ok("search", 1),
				{"fetch", expect{verdict: deadline.VerdictThrottled, reason: deadline.ReasonRetryAfterTooLong, attempts: 2, requests: 2}},
				ok("extract", 1),
			},
		},
		{
			name:   "flaky",
			about:  "fetch answers 503 twice, extract once, then both succeed: the POST is retried because it carries an Idempotency-Key",
			budget: defaultBudget,
			scripts: map[string]script{
				"fetch":   {{work: 5 * time.Millisecond, status: http.StatusServiceUnavailable}, {work: 5 * time.Millisecond, status: http.StatusServiceUnavailable}, normal("fetch")},
				"extract": {{work: 5 * time.Millisecond, status: http.StatusServiceUnavailable}, normal("extract")},
			},
			want: []stepWant{ok("search", 1), ok("fetch", 3), ok("extract", 2)},
		},
		{
			name:   "refused",
			about:  "a 10ms budget is below the 20ms floor: every step is refused before dialing, no provider sees a request",
			budget: 10 * time.Millisecond,
			want: []stepWant{
				refused("search"), refused("fetch"), refused("extract"),
			},
		},
	}
}

// scenarioNames returns the names of every scenario, for help and errors.
func scenarioNames() []string {
	var names []string
	for _, sc := range scenarios() {
		names = append(names, sc.name)
	}
	return names
}

// scenarioBudgets says each scenario's budget, for the help text:
// "ok 1s, tight 110ms, …".
func scenarioBudgets() string {
	var b []string
	for _, sc := range scenarios() {
		b = append(b, sc.name+" "+fmtDur(sc.budget))
	}
	return strings.Join(b, ", ")
}

// findScenario returns the scenario called name.
func findScenario(name string) (scenario, error) {
	all := scenarios()
	i := slices.IndexFunc(all, func(sc scenario) bool { return sc.name == name })
	if i < 0 {
		return scenario{}, fmt.Errorf("unknown scenario %q: want one of %s", name, strings.Join(scenarioNames(), ", "))
	}
	return all[i], nil
}
