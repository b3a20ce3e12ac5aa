package deadlinehttp

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// referenceList is parseBudgetList written the slow, obvious way.
func referenceList(lines []string) budgetList {
	var l budgetList
	members := 0
	for _, line := range lines {
		for _, m := range strings.Split(line, ",") {
			m = strings.Trim(m, " \t")
			if m == "" {
				continue
			}
			members++
			ms, err := strconv.ParseUint(m, 10, 64)
			if err != nil || len(m) > 10 || strings.ContainsAny(m, "+-") {
				l.malformed = true
				continue
			}
			if d := time.Duration(ms) * time.Millisecond; !l.valid || d < l.min {
				l.min, l.valid = d, true
			}
		}
	}
	l.malformed = l.malformed || members == 0
	return l
}

// FuzzHandlerBudgetList: the middleware reads one or two header lines as a
// list, keeps the smallest valid member, never grants more than the
// maximum, refuses exactly what is at or below the floor (or spent),
// reports a bounded prefix of what is malformed, and leaves the request's
// header as it was.
func FuzzHandlerBudgetList(f *testing.F) {
	for _, s := range [][2]string{
		{"50, 20", ""}, {"1", "1"}, {"0", ""}, {"0000000000", "7"}, {" 5 ,\t6 ", ""}, {",,", ""},
		{"abc, 30", "9999999999"}, {"10000000000", "5"}, {"+5", "-5"}, {"", ""}, {"é" + strings.Repeat("x", 70), "1"},
	} {
		f.Add(s[0], s[1], true, int64(2*time.Second), int64(20*time.Millisecond))
	}
	f.Fuzz(func(t *testing.T, first, second string, two bool, maxNs, floorNs int64) {
		lines := []string{first}
		if two {
			lines = append(lines, second)
		}
		got, want := parseBudgetList(lines), referenceList(lines)
		if got != want {
			t.Fatalf("parseBudgetList(%q) = %+v, want %+v", lines, got, want)
		}
		if got.valid && (got.min < 0 || got.min > MaxBudget) {
			t.Fatalf("parseBudgetList(%q) = %v out of range", lines, got.min)
		}

		joined := strings.Join(lines, ", ")
		p := malformedPrefix(lines)
		if len(p) > MaxMalformedValue || !strings.HasPrefix(joined, p) ||
			len(joined) <= MaxMalformedValue && p != joined ||
			len(joined) > MaxMalformedValue && len(p) < MaxMalformedValue-3 {
			t.Fatalf("malformedPrefix(%q) = %q", lines, p)
		}

		maxBudget := time.Duration(maxNs)
		floor := time.Duration(floorNs)
		h, err := NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), WithMaxBudget(maxBudget), WithFloor(floor))
		if maxBudget <= 0 || floor < 0 || floor >= maxBudget {
			if err == nil || h != nil {
				t.Fatalf("max %v, floor %v: no error", maxBudget, floor)
			}
			return
		}
		if err != nil {
			t.Fatalf("max %v, floor %v: %v", maxBudget, floor, err)
		}

		var budget time.Duration
		called, reports := false, []string(nil)
		var a Admission
		h, _ = NewHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			called = true
			d, _ := deadline.FromContext(r.Context())
			budget = d.Budget()
		}), WithMaxBudget(maxBudget), WithFloor(floor),
			WithMalformed(func(r *http.Request, v string) { reports = append(reports, v) }),
			WithAdmission(func(r *http.Request, in Admission) { a = in }))
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header[DefaultHeader] = slices.Clone(lines)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)

		if !slices.Equal(r.Header[DefaultHeader], lines) {
			t.Fatalf("the request's header changed: %q, was %q", r.Header[DefaultHeader], lines)
		}
		if got.malformed != (len(reports) == 1) || len(reports) > 1 || got.malformed && reports[0] != p {
			t.Fatalf("header %q: reports %q", lines, reports)
		}
		effective := maxBudget
		if got.valid {
			effective = min(got.min, maxBudget)
		}
		if a.Budget != effective || a.HeaderBudget != got.min || a.HeaderValid != got.valid {
			t.Fatalf("header %q, max %v: admission %+v, want budget %v", lines, maxBudget, a, effective)
		}
		refuse := effective <= floor || effective == 0
		switch {
		case refuse && (called || rec.Code != http.StatusGatewayTimeout || rec.Header().Get(RefusedHeader) == "" || !a.Refused()):
			t.Fatalf("header %q, max %v, floor %v: not refused (code %d, admission %+v)", lines, maxBudget, floor, rec.Code, a)
		case !refuse && (!called || budget != effective || a.Refused()):
			t.Fatalf("header %q, max %v, floor %v: budget %v, want %v (called %t)", lines, maxBudget, floor, budget, effective, called)
		}
	})
}
