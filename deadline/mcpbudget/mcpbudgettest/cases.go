// Package mcpbudgettest holds what every MCP SDK adapter's tests check a
// server against: the hostile _meta budget values a peer may send
// ([MetaCases]) and what a server with a maximum of [Max] and no floor
// must make of each, and the scaffolding both adapters' tests record with
// ([Admissions], [Arrivals]). It imports the standard library and the root
// module only, so that the test modules of both SDKs share one table.
package mcpbudgettest

import (
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// Max is the maximum of the server the cases are written for (its floor
// is 0).
const Max = 2 * time.Second

// Outcome is what the server's admission must decide for one case.
type Outcome struct {
	Present   bool // the inbound budget counted
	Malformed bool // the value was there but not a budget
	Budget    time.Duration
	Limit     admission.Limit
	Refusal   admission.Refusal
}

// MetaCase is one kind of _meta a peer may send: Members is the raw JSON
// inside the request's _meta object, as it goes on the wire (a key may be
// repeated, or escaped); Want is what a server that sees the raw JSON
// (behind an adapter's HTTP handler: the smallest valid value of a
// repeated key) decides. LastWins, set for a repeated key only, is what a
// server decides where only the SDK's decoded _meta is seen (stdio, in
// memory): encoding/json keeps the last value.
type MetaCase struct {
	Name     string
	Members  string
	Want     Outcome
	LastWins *Outcome
}

const k = `"` + mcpbudget.MetaKey + `":`

func budget(d time.Duration) Outcome {
	return Outcome{Present: true, Budget: d, Limit: admission.ByInbound}
}

var (
	spent     = Outcome{Present: true, Limit: admission.ByInbound, Refusal: admission.RefusalSpent}
	clamped   = Outcome{Present: true, Budget: Max, Limit: admission.ByMax}
	malformed = Outcome{Malformed: true, Budget: Max, Limit: admission.ByMax}
	absent    = Outcome{Budget: Max, Limit: admission.ByMax}
)

// MetaCases returns the 28 kinds of _meta budget values both SDKs'
// servers are tested with, a new slice each call.
func MetaCases() []MetaCase {
	return []MetaCase{
		{"integer", k + `500`, budget(500 * time.Millisecond), nil},
		{"one millisecond", k + `1`, budget(time.Millisecond), nil},
		{"zero: spent", k + `0`, spent, nil},
		{"minus zero: spent", k + `-0`, spent, nil},
		{"integer written as a float", k + `500.0`, budget(500 * time.Millisecond), nil},
		{"integer with an exponent", k + `5e2`, budget(500 * time.Millisecond), nil},
		{"above the maximum: clamped", k + `5000`, clamped, nil},
		{"the wire's bound: clamped", k + `9999999999`, clamped, nil},
		{"eleven digits: clamped", k + `99999999999`, clamped, nil},
		{"thirty digits: clamped", k + `123456789012345678901234567890`, clamped, nil},
		{"absurdly large: clamped", k + `1e300`, clamped, nil},
		{"negative: ignored", k + `-5`, malformed, nil},
		{"absurdly negative: ignored", k + `-1e300`, malformed, nil},
		{"fractional: ignored", k + `1.5`, malformed, nil},
		{"tiny fraction: ignored", k + `0.0001`, malformed, nil},
		{"string of digits: ignored", k + `"100"`, malformed, nil},
		{"empty string: ignored", k + `""`, malformed, nil},
		{"true: ignored", k + `true`, malformed, nil},
		{"false: ignored", k + `false`, malformed, nil},
		{"null: ignored", k + `null`, malformed, nil},
		{"object: ignored", k + `{"ms":5}`, malformed, nil},
		{"array: ignored", k + `[5]`, malformed, nil},
		{"absent: the maximum", `"com.example/other":5`, absent, nil},
		{"the key in capitals: absent", `"IO.GITHUB.DEADLINEBUDGET/BUDGET-MS":5`, absent, nil},
		{"the key escaped: read", `"io.github.deadlinebudget\/budget-\u006ds":50`, budget(50 * time.Millisecond), nil},
		{"repeated, 50 then 999999", k + `50,` + k + `999999`, budget(50 * time.Millisecond), &clamped},
		{"repeated, 999999 then 50", k + `999999,` + k + `50`, budget(50 * time.Millisecond), ptr(budget(50 * time.Millisecond))},
		{"repeated, 50 then malformed", k + `50,` + k + `"1"`, budget(50 * time.Millisecond), &malformed},
	}
}

func ptr(o Outcome) *Outcome { return &o }

// Last returns the outcome where only the SDK's decoded _meta is seen:
// LastWins for a repeated key, else Want.
func (c MetaCase) Last() Outcome {
	if c.LastWins != nil {
		return *c.LastWins
	}
	return c.Want
}

// Admissions records what a server decided for each request, for a test
// to read back; the adapters' tests call Record from their WithAdmission
// function. The zero value is ready; it is safe for concurrent use.
type Admissions struct {
	mu  sync.Mutex
	all []mcpbudget.Admission
}

// Record adds a.
func (r *Admissions) Record(a mcpbudget.Admission) {
	r.mu.Lock()
	r.all = append(r.all, a)
	r.mu.Unlock()
}

// List returns what was recorded, in order.
func (r *Admissions) List() []mcpbudget.Admission {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]mcpbudget.Admission(nil), r.all...)
}
