package mcpbudget

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
)

// MetaKey is the key under which a request's _meta carries the budget the
// caller gives the server: the attempt's lease in whole milliseconds,
// rounded up, as a JSON integer from 1 to 9999999999 (the bound of
// deadlinehttp's Deadline-Budget-Ms header and Connect's
// connect-timeout-ms), e.g.
//
//	"params": {"_meta": {"io.github.deadlinebudget/budget-ms": 870}, "name": "search", …}
//
// The name follows MCP's rules for _meta keys ([ValidKey]): a prefix of
// dot-separated labels in reverse DNS notation, ending with a slash, then a
// name. The prefix io.github.deadlinebudget is the project's own (its
// second label is neither modelcontextprotocol nor mcp, which MCP
// reserves).
const MetaKey = "io.github.deadlinebudget/budget-ms"

// MaxBudget is the largest budget the _meta field carries: 9999999999 ms
// (about 115.7 days). A sender clamps a longer lease to it; a receiver
// reads a larger integer as this bound, which its maximum then clamps.
const MaxBudget = 9999999999 * time.Millisecond

const maxBudgetMs = 9999999999

// BudgetMs returns d as the value sent in _meta: whole milliseconds,
// rounded up, at least 1 (0 means "no limit" to some peers and is never
// sent) and at most 9999999999.
func BudgetMs(d time.Duration) int64 {
	switch {
	case d <= time.Millisecond:
		return 1
	case d >= MaxBudget:
		return maxBudgetMs
	}
	ms := int64(d / time.Millisecond)
	if d%time.Millisecond != 0 {
		ms++
	}
	return ms
}

// roundUpMs is d in whole milliseconds rounded up, 0 for nothing left.
func roundUpMs(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return BudgetMs(d)
}

// Kind is what one _meta budget value held, as a server reads it.
type Kind uint8

const (
	// Absent: no such key, or no _meta.
	Absent Kind = iota
	// Budget: an integer from 0 to 9999999999 (0 is a budget already spent).
	Budget
	// Huge: an integer above 9999999999, read as [MaxBudget].
	Huge
	// Malformed: anything else (negative, fractional, a string, a bool,
	// null, an object, an array): ignored, as if absent.
	Malformed
)

// Parse reads the _meta value v as decoded from JSON: a float64 (what
// encoding/json decodes a number into), a json.Number, an int or an int64.
// present says whether the key was there at all. It accepts a
// non-negative integer, however it is written (5, 5.0, 5e2): 0 is a budget
// already spent, a value above 9999999999 is read as [MaxBudget] ([Huge]).
// A negative or fractional number, a string, a bool, null, an object or
// an array is [Malformed], and its duration 0. It never panics.
func Parse(v any, present bool) (time.Duration, Kind) {
	if !present {
		return 0, Absent
	}
	switch n := v.(type) {
	case float64:
		return fromFloat(n)
	case json.Number:
		if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
			return fromInt(i)
		}
		if strings.ContainsAny(string(n), ".eE") {
			if f, err := n.Float64(); err == nil || isRange(err) {
				return fromFloat(f)
			}
		}
		if digits(string(n)) {
			return MaxBudget, Huge // an integer too long for int64
		}
	case int:
		return fromInt(int64(n))
	case int64:
		return fromInt(n)
	}
	return 0, Malformed
}

func fromInt(i int64) (time.Duration, Kind) {
	switch {
	case i < 0:
		return 0, Malformed
	case i > maxBudgetMs:
		return MaxBudget, Huge
	}
	return time.Duration(i) * time.Millisecond, Budget
}

func fromFloat(f float64) (time.Duration, Kind) {
	switch {
	case math.IsNaN(f) || f < 0 || f != math.Trunc(f):
		return 0, Malformed
	case f > maxBudgetMs: // +Inf included
		return MaxBudget, Huge
	}
	return time.Duration(f) * time.Millisecond, Budget
}

func isRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// KeyRule says what [ValidKey] accepts, for a [*deadline.PolicyError]'s
// Allowed.
const KeyRule = `an MCP _meta key "prefix/name" with a reverse-DNS prefix not reserved by MCP, e.g. "com.example/budget-ms"`

// ValidKey reports whether k is a _meta key name by MCP's rules: an
// optional prefix (labels separated by dots, each starting with a letter
// and ending with a letter or digit, hyphens inside, then a slash) and a
// name (alphanumerics at both ends; hyphens, underscores, dots and
// alphanumerics between). This package requires the prefix, and refuses
// one MCP reserves (its second label modelcontextprotocol or mcp).
func ValidKey(k string) bool {
	prefix, name, ok := strings.Cut(k, "/")
	if !ok || prefix == "" || !validMetaName(name) {
		return false
	}
	labels := strings.Split(prefix, ".")
	for _, l := range labels {
		if !validLabel(l) {
			return false
		}
	}
	if len(labels) >= 2 && (labels[1] == "modelcontextprotocol" || labels[1] == "mcp") {
		return false
	}
	return true
}

func validLabel(l string) bool {
	if l == "" || !letter(l[0]) || !alnum(l[len(l)-1]) {
		return false
	}
	for i := 1; i < len(l)-1; i++ {
		if !alnum(l[i]) && l[i] != '-' {
			return false
		}
	}
	return true
}

func validMetaName(n string) bool {
	if n == "" || !alnum(n[0]) || !alnum(n[len(n)-1]) {
		return false
	}
	for i := 1; i < len(n)-1; i++ {
		c := n[i]
		if !alnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func letter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func alnum(c byte) bool  { return letter(c) || c >= '0' && c <= '9' }
