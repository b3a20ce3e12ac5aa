package deadlinehttp

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultHeader is the request header that carries an attempt's granted
// lease from client to server: the lease in whole milliseconds, rounded up,
// as 1 to 10 ASCII digits (1..9999999999). See [FormatBudget] and
// [ParseBudget]. [WithHeader] and [WithInboundHeader] change the name.
const DefaultHeader = "Deadline-Budget-Ms"

// RefusedHeader is the response header [NewHandler] sets on the 504 it
// answers when a request's effective budget is at or below the server's
// floor, or spent. Its value is an RFC 8941 dictionary of two integers in
// milliseconds, rounded up: the effective budget the request arrived with
// (after the clamp to the maximum and to the context's deadline; 0 when
// nothing was left) and the server's floor, e.g. "budget-ms=5, floor-ms=20"
// or "budget-ms=0, floor-ms=0". A refusal for another reason than the
// floor adds a token naming it: "budget-ms=80, floor-ms=0, reason=learned"
// (below what the route very likely needs, [WithLearnedAdmission]) or
// "reason=queue_timeout" (it waited for a slot until it could no longer
// finish, [WithAdmissionQueue]).
//
// On a 503 the header says the request was shed from a standing admission
// queue after it waited there as long as such a queue lets a request wait
// ([WithAdmissionQueue]): "budget-ms=300, floor-ms=0, reason=standing_queue".
// That is the server's admission choosing whom to serve ("shed now, come
// back"), not a downstream failing.
//
// The [Transport] never retries a 504 that carries this header: the next
// attempt would arrive with even less and be refused again. It retries a
// 503 carrying "reason=standing_queue" as any 503, but charges no overload
// tokens for it ([WithOverloadCharge]) and marks it [deadline.Shed], which
// client-side throttling does not count.
const RefusedHeader = "Deadline-Refused"

// reasonStandingQueue is RefusedHeader's reason on a 503 that shed a
// request from a standing queue.
const reasonStandingQueue = "standing_queue"

// shedAnswer reports whether h's RefusedHeader names reasonStandingQueue:
// one header line, an RFC 8941 dictionary with a member reason=standing_queue.
func shedAnswer(h http.Header) bool {
	vs := h[RefusedHeader]
	if len(vs) != 1 {
		return false
	}
	for m := range strings.SplitSeq(vs[0], ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(m), "="); ok && k == "reason" && v == reasonStandingQueue {
			return true
		}
	}
	return false
}

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
// digits, a list of several values, or zero (which some peers read as "no
// limit"). A true result is always in [1ms, MaxBudget].
//
// ParseBudget reads one value as a sender writes it. [NewHandler] reads the
// whole header as a list: several lines or comma-separated values give the
// smallest, and an explicit 0 is a budget already spent, refused with 504
// (see [NewHandler]).
func ParseBudget(value string) (time.Duration, bool) {
	d, ok := parseBudgetMember(value)
	if !ok || d < time.Millisecond {
		return 0, false
	}
	return d, true
}

// parseBudgetMember parses 1 to 10 ASCII digits as milliseconds, zero
// included: the syntax of one member of the budget header.
func parseBudgetMember(value string) (time.Duration, bool) {
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
	return time.Duration(ms) * time.Millisecond, true
}

// budgetList is what the lines of a budget header held, read as an RFC 9110
// list (§5.6.1): members separated by commas, with optional spaces and tabs
// around each, empty members ignored.
type budgetList struct {
	min       time.Duration // the smallest valid member, 0 included; 0 when !valid
	valid     bool          // at least one member was 1 to 10 digits
	malformed bool          // a member was not, or the lines held no member at all
}

// parseBudgetList reads every line of the header and keeps the smallest
// valid member. A proxy that appends a line, or joins lines with commas,
// can therefore lower the budget but never raise it. The scan is linear in
// the header's length and allocates nothing.
func parseBudgetList(lines []string) budgetList {
	var l budgetList
	members := 0
	for _, line := range lines {
		for rest, more := line, true; more; {
			var member string
			member, rest, more = strings.Cut(rest, ",")
			member = strings.Trim(member, " \t")
			if member == "" {
				continue
			}
			members++
			d, ok := parseBudgetMember(member)
			switch {
			case !ok:
				l.malformed = true
			case !l.valid || d < l.min:
				l.min, l.valid = d, true
			}
		}
	}
	if members == 0 {
		l.malformed = true
	}
	return l
}

// MaxMalformedValue is the most of a malformed budget header that
// [WithMalformed] receives: its first 64 bytes (the lines joined with ", "),
// cut back to the start of a UTF-8 sequence the cut would split. A header
// can be as long as the server's header limit allows (net/http: 1 MiB); a
// log line or a metric label needs only enough to recognise it.
const MaxMalformedValue = 64

// malformedPrefix returns the first MaxMalformedValue bytes of the lines
// joined with ", ", without building the whole join.
func malformedPrefix(lines []string) string {
	if len(lines) == 1 && len(lines[0]) <= MaxMalformedValue {
		return lines[0]
	}
	const limit = MaxMalformedValue + 1 // one byte more shows whether the cut splits a rune
	buf := make([]byte, 0, limit)
	add := func(s string) { buf = append(buf, s[:min(len(s), limit-len(buf))]...) }
	for i, line := range lines {
		if i > 0 {
			add(", ")
		}
		add(line)
		if len(buf) == limit {
			break
		}
	}
	if len(buf) <= MaxMalformedValue {
		return string(buf)
	}
	n := MaxMalformedValue
	for i := 0; i < utf8.UTFMax-1 && n > 0 && !utf8.RuneStart(buf[n]); i++ {
		n--
	}
	return string(buf[:n])
}
