package budgetprop

import (
	"strconv"
	"strings"
	"time"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// The carrier fields the [Propagator] writes and reads. Keys are lower
// case, as gRPC metadata requires; HTTP headers are case-insensitive, so on
// HTTP FieldBudget is the header deadlinehttp's Transport sends and
// deadlinehttp.NewHandler reads ([deadlinehttp.DefaultHeader]).
const (
	// FieldBudget carries the remaining budget at injection, relative: 1 to
	// 10 ASCII digits of milliseconds, rounded up, at least 1, as
	// [deadlinehttp.FormatBudget] writes it. Exact on a direct hop: the
	// receiver turns it into a deadline on its own monotonic clock, no
	// clock agreement needed.
	FieldBudget = "deadline-budget-ms"
	// FieldExpiry carries the instant the budget ends on the sender's wall
	// clock: injection time plus FieldBudget, as 1 to 15 ASCII digits of
	// milliseconds since the Unix epoch. It is what a queue consumer
	// reads, since a relative budget does not count the time a message
	// waited.
	FieldExpiry = "deadline-expiry-unix-ms"
)

const (
	maxBudgetDigits = 10 // deadlinehttp's bound: 9999999999 ms
	maxExpiryDigits = 15 // up to the year 33658; cannot overflow int64
	// maxSkewMs bounds an expiry's distance from now before it becomes a
	// Duration (which holds ±292 years), so no timestamp can overflow.
	maxSkewMs = int64(deadlinehttp.MaxBudget / time.Millisecond)
)

// field is one carrier field as read: its smallest valid member, whether
// there was one, and whether anything else was there.
type field struct {
	ms        int64
	valid     bool
	malformed bool
}

// parseField reads the values of one field as an RFC 9110 list, as
// deadlinehttp.NewHandler reads its header: members separated by commas,
// spaces and tabs around each trimmed, empty members ignored. A member is
// valid when it is 1 to maxDigits ASCII digits; the smallest valid member
// counts, so a duplicated or appended value can lower a budget, or bring
// an expiry sooner, never the reverse. Anything else (a sign, a unit, a
// fraction, too many digits, a value list with no member) marks the field
// malformed. It allocates nothing.
func parseField(values []string, maxDigits int) field {
	var f field
	members := 0
	for _, v := range values {
		for rest, more := v, true; more; {
			var m string
			m, rest, more = strings.Cut(rest, ",")
			m = strings.Trim(m, " \t")
			if m == "" {
				continue
			}
			members++
			n, ok := parseDigits(m, maxDigits)
			switch {
			case !ok:
				f.malformed = true
			case !f.valid || n < f.ms:
				f.ms, f.valid = n, true
			}
		}
	}
	if len(values) > 0 && members == 0 {
		f.malformed = true
	}
	return f
}

// parseDigits parses 1 to maxDigits ASCII digits (maxDigits <= 18, so no
// overflow).
func parseDigits(s string, maxDigits int) (int64, bool) {
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// maxExpiryMs is the largest expiry the field holds (15 digits).
const maxExpiryMs = 999_999_999_999_999

// formatExpiry writes an expiry in unix milliseconds, bounded to what the
// field holds: a negative one (a wall clock before 1970) is written as 0,
// already past.
func formatExpiry(ms int64) string {
	return strconv.FormatInt(min(max(ms, 0), maxExpiryMs), 10)
}

// budgetMs is what FieldBudget carries for d: deadlinehttp.FormatBudget's
// rounding (up, at least 1, at most 9999999999), as a number.
func budgetMs(d time.Duration) int64 {
	switch {
	case d <= time.Millisecond:
		return 1
	case d >= deadlinehttp.MaxBudget:
		return maxSkewMs
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// untilMs is the time from now (unix ms) to exp (unix ms) as a Duration,
// bounded to ±MaxBudget so that a far-future or far-past timestamp cannot
// overflow.
func untilMs(exp, now int64) time.Duration {
	d := exp - now // both in [0, 1e15]: no overflow
	d = min(max(d, -maxSkewMs), maxSkewMs)
	return time.Duration(d) * time.Millisecond
}
