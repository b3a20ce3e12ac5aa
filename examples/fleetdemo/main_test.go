package main

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFetchP95IsFound replays the demo's latency draws (the same seeds, the
// same plan: up to three attempts per step, each cut at its step's
// ceiling) without timers: fetch's ceiling must cut fewer than the
// 1 − quantile of attempts above the suggested quantile, with room for a
// loaded machine's late timers, or the connector has no p95 to suggest and
// the cold client gets no ceiling for fetch.
func TestFetchP95IsFound(t *testing.T) {
	const clients, calls = 50, 30
	var attempts, cut [2]int
	for id := range clients {
		latency := newLatency(id)
		for range calls {
			for i, s := range steps {
				ok := false
				for range 3 {
					attempts[i]++
					if latency(s.median) < s.ceiling {
						ok = true
						break
					}
					cut[i]++
				}
				if !ok {
					break
				}
			}
		}
	}
	for i, s := range steps {
		share := float64(cut[i]) / float64(attempts[i])
		t.Logf("%s: %d of %d attempts cut (%.1f%%)", s.name, cut[i], attempts[i], 100*share)
		assert.Less(t, share, 0.8*(1-quantile), "%s: the p%g must lie below the ceiling, with a margin", s.name, 100*quantile)
	}
}
