package budgetprop

import (
	"strconv"
	"strings"
	"testing"
)

// referenceField is parseField written the obvious way, with strconv, as
// the fuzzer's oracle.
func referenceField(values []string, maxDigits int) field {
	var f field
	members := 0
	for _, v := range values {
		for _, m := range strings.Split(v, ",") {
			m = strings.Trim(m, " \t")
			if m == "" {
				continue
			}
			members++
			n, err := strconv.ParseUint(m, 10, 64)
			if err != nil || len(m) > maxDigits {
				f.malformed = true
				continue
			}
			if !f.valid || int64(n) < f.ms {
				f.ms, f.valid = int64(n), true
			}
		}
	}
	if len(values) > 0 && members == 0 {
		f.malformed = true
	}
	return f
}

func FuzzParseField(f *testing.F) {
	for _, s := range []string{"870", "0", "", " , ", "1.5", "-1", "+1", "9999999999", "99999999999", "900, 300", "abc, 400", "1764600000000", "1234567890123456", "\t7\t", "٣"} {
		f.Add(s, "")
		f.Add(s, "500")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, values := range [][]string{{a}, {a, b}} {
			for _, digits := range []int{maxBudgetDigits, maxExpiryDigits} {
				got, want := parseField(values, digits), referenceField(values, digits)
				if got != want {
					t.Fatalf("parseField(%q, %d) = %+v, want %+v", values, digits, got, want)
				}
				if got.valid && (got.ms < 0 || len(strconv.FormatInt(got.ms, 10)) > digits) {
					t.Fatalf("parseField(%q, %d) = %d: out of range", values, digits, got.ms)
				}
			}
		}
	})
}
