package deadline_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
)

func TestAdmit(t *testing.T) {
	const maxB, floor = 5 * time.Second, 20 * time.Millisecond
	tests := []struct {
		name    string
		in      deadline.Inbound
		outer   time.Duration // 0: none
		budget  time.Duration
		limit   deadline.AdmissionLimit
		refusal deadline.Refusal
	}{
		{"no inbound, no outer: the maximum", deadline.Inbound{}, 0, maxB, deadline.AdmitByMax, deadline.RefusalNone},
		{"inbound below the maximum", deadline.Inbound{Present: true, Budget: time.Second}, 0, time.Second, deadline.AdmitByInbound, deadline.RefusalNone},
		{"inbound equal to the maximum wins the tie", deadline.Inbound{Present: true, Budget: maxB}, 0, maxB, deadline.AdmitByInbound, deadline.RefusalNone},
		{"inbound above the maximum is clamped", deadline.Inbound{Present: true, Budget: time.Hour}, 0, maxB, deadline.AdmitByMax, deadline.RefusalNone},
		{"not present: its budget is ignored", deadline.Inbound{Budget: time.Millisecond}, 0, maxB, deadline.AdmitByMax, deadline.RefusalNone},
		{"inbound zero is spent", deadline.Inbound{Present: true}, 0, 0, deadline.AdmitByInbound, deadline.RefusalSpent},
		{"inbound negative is spent, budget 0", deadline.Inbound{Present: true, Budget: -time.Second}, 0, 0, deadline.AdmitByInbound, deadline.RefusalSpent},
		{"inbound at the floor is refused", deadline.Inbound{Present: true, Budget: floor}, 0, floor, deadline.AdmitByInbound, deadline.RefusalFloor},
		{"inbound just above the floor is admitted", deadline.Inbound{Present: true, Budget: floor + 1}, 0, floor + 1, deadline.AdmitByInbound, deadline.RefusalNone},
		{"outer sooner than the inbound", deadline.Inbound{Present: true, Budget: time.Second}, 300 * time.Millisecond, 300 * time.Millisecond, deadline.AdmitByOuter, deadline.RefusalNone},
		{"outer equal to the inbound: the inbound wins", deadline.Inbound{Present: true, Budget: time.Second}, time.Second, time.Second, deadline.AdmitByInbound, deadline.RefusalNone},
		{"outer passed", deadline.Inbound{}, -time.Second, 0, deadline.AdmitByOuter, deadline.RefusalSpent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var outer deadline.Deadline
				if tt.outer != 0 {
					outer = deadline.New(tt.outer)
				}
				a := deadline.Admit(tt.in, outer, maxB, floor)
				assert.Equal(t, tt.budget, a.Budget)
				assert.Equal(t, tt.limit, a.Limit, "limit %s", a.Limit)
				assert.Equal(t, tt.refusal, a.Refusal, "refusal %s", a.Refusal)
				assert.Equal(t, tt.refusal != deadline.RefusalNone, a.Refused())
				assert.Equal(t, tt.outer != 0, a.HasOuter)
				assert.Equal(t, tt.outer, a.OuterRemaining)
				if a.Limit == deadline.AdmitByOuter {
					assert.Equal(t, outer, a.Deadline)
				} else {
					assert.Equal(t, max(tt.budget, 0), a.Deadline.Remaining())
				}
			})
		})
	}
}

func TestAdmitInboundEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		end := time.Now().Add(2 * time.Second)
		a := deadline.Admit(deadline.Inbound{Present: true, End: end}, deadline.Deadline{}, 5*time.Second, 0)
		assert.Equal(t, 2*time.Second, a.Budget)
		assert.Equal(t, 2*time.Second, a.Inbound.Budget)
		assert.Equal(t, end, a.Deadline.End(), "the inbound instant is kept, not re-derived")

		a = deadline.Admit(deadline.Inbound{Present: true, End: time.Now().Add(-time.Second)}, deadline.Deadline{}, 5*time.Second, 0)
		assert.Equal(t, -time.Second, a.Inbound.Budget, "the inbound budget as measured, negative when passed")
		assert.Equal(t, time.Duration(0), a.Budget)
		assert.Equal(t, deadline.RefusalSpent, a.Refusal)
	})
}

func TestAdmissionNames(t *testing.T) {
	assert.Equal(t, "header", deadline.AdmitByInbound.String())
	assert.Equal(t, "max", deadline.AdmitByMax.String())
	assert.Equal(t, "context", deadline.AdmitByOuter.String())
	assert.Equal(t, "unknown", deadline.AdmissionLimit(0).String())
	assert.Equal(t, "none", deadline.RefusalNone.String())
	assert.Equal(t, "spent", deadline.RefusalSpent.String())
	assert.Equal(t, "floor", deadline.RefusalFloor.String())
	assert.Equal(t, "unknown", deadline.Refusal(200).String())
}
