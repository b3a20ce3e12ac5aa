package readable

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond:  "1.5s",
		48 * time.Hour:           "48h0m0s",
		72 * time.Hour:           "3 days",
		24 * time.Hour * 365:     "1 year",
		24 * time.Hour * 365 * 3: "3 years",
		math.MaxInt64:            "more than 292 years",
	} {
		assert.Equal(t, want, Duration(d), "%d", d)
	}
}
