package deadlinehttp

import (
	"strconv"
	"time"
)

// DefaultHeader is the request header that carries an attempt's granted
// lease from client to server: the lease in whole milliseconds, rounded up,
// as 1 to 10 ASCII digits (1..9999999999). See [FormatBudget] and
// [ParseBudget]. [WithHeader] and [WithInboundHeader] change the name.
const DefaultHeader = "Deadline-Budget-Ms"

// RefusedHeader is the response header [NewHandler] sets on the 504 it
// answers when the inbound budget is at or below the server's floor. Its
// value is an RFC 8941 dictionary of two integers in milliseconds, the
// budget the request arrived with (after the clamp, rounded up) and the
// server's floor (rounded up), e.g. "budget-ms=5, floor-ms=20".
//
// The [Transport] never retries a 504 that carries this header: the next
// attempt would arrive with even less and be refused again.
const RefusedHeader = "Deadline-Refused"

// MaxBudget is the largest budget the header can carry: 9999999999 ms (10
// digits, about 115.7 days), the same bound as Connect's connect-timeout-ms.
const MaxBudget = 9999999999 * time.Millisecond

// maxBudgetDigits is the longest value ParseBudget accepts.
const maxBudgetDigits = 10

// FormatBudget returns d as the budget header's value: whole milliseconds,
// rounded up so that a sub-millisecond remainder is never lost, at least 1
// (a zero or negative d gives "1": "0" means "no limit" to some peers and
// must never be sent) and at most 9999999999 (a longer d is clamped to
// [MaxBudget]).
func FormatBudget(d time.Duration) string {
	switch {
	case d <= time.Millisecond:
		return "1"
	case d >= MaxBudget:
		return "9999999999"
	}
	ms := d / time.Millisecond
	if d%time.Millisecond != 0 {
		ms++
	}
	return strconv.FormatInt(int64(ms), 10)
}

// ParseBudget parses a budget header value in the format [FormatBudget]
// writes: 1 to 10 ASCII digits (leading zeros allowed within the 10) whose
// value is at least 1, read as milliseconds. It reports false for anything
// else: an empty value, a sign, spaces, a unit or a fraction, more than 10
// digits, or zero (which some peers read as "no limit"). A true result is
// always in [1ms, MaxBudget].
func ParseBudget(value string) (time.Duration, bool) {
	if len(value) == 0 || len(value) > maxBudgetDigits {
		return 0, false
	}
	var ms int64
	for i := 0; i < len(value); i++ {
		c := value[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		ms = ms*10 + int64(c-'0') // 10 digits cannot overflow int64
	}
	if ms < 1 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
