// Package readable formats durations for people in the error texts of
// package deadline and package overload, so that both say a duration the
// same way.
package readable

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Duration formats d for a person: as time.Duration does up to two days,
// then in days or years to one decimal, and the largest Duration (where a
// longer value saturated) as a bound rather than as 2562047h47m16.854775807s.
func Duration(d time.Duration) string {
	const day, year = 24 * time.Hour, 365 * 24 * time.Hour
	switch {
	case d == math.MaxInt64:
		return "more than 292 years"
	case d >= year:
		return decimal(float64(d)/float64(year), "year")
	case d > 2*day:
		return decimal(float64(d)/float64(day), "day")
	}
	return d.String()
}

// decimal writes x to one decimal (none when it is whole) and the unit,
// plural unless x is 1.
func decimal(x float64, unit string) string {
	s := strings.TrimSuffix(strconv.FormatFloat(x, 'f', 1, 64), ".0")
	if s != "1" {
		unit += "s"
	}
	return s + " " + unit
}
