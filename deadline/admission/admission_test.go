package admission_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/admission"
)

func TestAdmit(t *testing.T) {
	const maxB, floor = 5 * time.Second, 20 * time.Millisecond
	tests := []struct {
		name    string
		in      admission.Inbound
		outer   time.Duration // 0: none
		budget  time.Duration
		limit   admission.Limit
		refusal admission.Refusal
	}{
		{"no inbound, no outer: the maximum", admission.Inbound{}, 0, maxB, admission.ByMax, admission.RefusalNone},
		{"inbound below the maximum", admission.Inbound{Present: true, Budget: time.Second}, 0, time.Second, admission.ByInbound, admission.RefusalNone},
		{"inbound equal to the maximum wins the tie", admission.Inbound{Present: true, Budget: maxB}, 0, maxB, admission.ByInbound, admission.RefusalNone},
		{"inbound above the maximum is clamped", admission.Inbound{Present: true, Budget: time.Hour}, 0, maxB, admission.ByMax, admission.RefusalNone},
		{"not present: its budget is ignored", admission.Inbound{Budget: time.Millisecond}, 0, maxB, admission.ByMax, admission.RefusalNone},
		{"inbound zero is spent", admission.Inbound{Present: true}, 0, 0, admission.ByInbound, admission.RefusalSpent},
		{"inbound negative is spent, budget 0", admission.Inbound{Present: true, Budget: -time.Second}, 0, 0, admission.ByInbound, admission.RefusalSpent},
		{"inbound at the floor is refused", admission.Inbound{Present: true, Budget: floor}, 0, floor, admission.ByInbound, admission.RefusalFloor},
		{"inbound just above the floor is admitted", admission.Inbound{Present: true, Budget: floor + 1}, 0, floor + 1, admission.ByInbound, admission.RefusalNone},
		{"outer sooner than the inbound", admission.Inbound{Present: true, Budget: time.Second}, 300 * time.Millisecond, 300 * time.Millisecond, admission.ByOuter, admission.RefusalNone},
		{"outer equal to the inbound: the inbound wins", admission.Inbound{Present: true, Budget: time.Second}, time.Second, time.Second, admission.ByInbound, admission.RefusalNone},
		{"outer passed", admission.Inbound{}, -time.Second, 0, admission.ByOuter, admission.RefusalSpent},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var outer deadline.Deadline
				if tt.outer != 0 {
					outer = deadline.New(tt.outer)
				}
				a := admission.Admit(tt.in, outer, admission.Limits{MaxBudget: maxB, Floor: floor})
				assert.Equal(t, tt.budget, a.Budget)
				assert.Equal(t, tt.limit, a.Limit, "limit %s", a.Limit)
				assert.Equal(t, tt.refusal, a.Refusal, "refusal %s", a.Refusal)
				assert.Equal(t, tt.refusal != admission.RefusalNone, a.Refused())
				assert.Equal(t, tt.outer != 0, a.HasOuter)
				assert.Equal(t, tt.outer, a.OuterRemaining)
				if a.Limit == admission.ByOuter {
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
		a := admission.Admit(admission.Inbound{Present: true, End: end}, deadline.Deadline{}, admission.Limits{MaxBudget: 5 * time.Second})
		assert.Equal(t, 2*time.Second, a.Budget)
		assert.Equal(t, 2*time.Second, a.Inbound.Budget)
		assert.Equal(t, end, a.Deadline.End(), "the inbound instant is kept, not re-derived")

		a = admission.Admit(admission.Inbound{Present: true, End: time.Now().Add(-time.Second)}, deadline.Deadline{}, admission.Limits{MaxBudget: 5 * time.Second})
		assert.Equal(t, -time.Second, a.Inbound.Budget, "the inbound budget as measured, negative when passed")
		assert.Equal(t, time.Duration(0), a.Budget)
		assert.Equal(t, admission.RefusalSpent, a.Refusal)
	})
}

func TestAdmissionNames(t *testing.T) {
	assert.Equal(t, "header", admission.ByInbound.String())
	assert.Equal(t, "max", admission.ByMax.String())
	assert.Equal(t, "context", admission.ByOuter.String())
	assert.Equal(t, "unknown", admission.Limit(0).String())
	assert.Equal(t, "none", admission.RefusalNone.String())
	assert.Equal(t, "spent", admission.RefusalSpent.String())
	assert.Equal(t, "floor", admission.RefusalFloor.String())
	assert.Equal(t, "unknown", admission.Refusal(200).String())
}

// TestLimitsValidate: the one check behind every transport's WithMaxBudget
// and WithFloor, naming the option.
func TestLimitsValidate(t *testing.T) {
	assert.NoError(t, admission.DefaultLimits().Validate())
	assert.Equal(t, admission.Limits{MaxBudget: 30 * time.Second}, admission.DefaultLimits())
	assert.NoError(t, admission.Limits{MaxBudget: time.Second, Floor: time.Second - 1}.Validate())
	for _, tc := range []struct {
		l    admission.Limits
		want string
	}{
		{admission.Limits{}, "deadline: invalid WithMaxBudget 0s: must be > 0"},
		{admission.Limits{MaxBudget: time.Second, Floor: -time.Millisecond}, "deadline: invalid WithFloor -1ms: must be >= 0"},
		{admission.Limits{MaxBudget: time.Second, Floor: time.Second},
			"deadline: invalid WithFloor 1s: must be below the maximum budget 1s (WithMaxBudget), or every call is refused"},
	} {
		err := tc.l.Validate()
		assert.EqualError(t, err, tc.want)
		assert.ErrorIs(t, err, deadline.ErrInvalidPolicy)
	}
}
