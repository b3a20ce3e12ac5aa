package overload

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLimiterOrderMatchesASortedList checks the overloaded order's treap
// against a list sorted by the same rule, through random arrivals and
// departures (keys with ties and without a deadline included): the call
// served first, every newcomer's place and the sizes.
func TestLimiterOrderMatchesASortedList(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 31))
	l := &Limiter{rnd: 1}
	base := time.Unix(1_700_000_000, 0)
	key := func() time.Time {
		if rng.IntN(10) == 0 {
			return time.Time{}
		}
		return base.Add(time.Duration(rng.IntN(50)) * time.Millisecond)
	}
	var ref []*waiter // served first first
	for i := range 5000 {
		if len(ref) > 0 && rng.IntN(3) == 0 {
			w := ref[rng.IntN(len(ref))]
			l.orderRemove(w)
			ref = slices.DeleteFunc(ref, func(o *waiter) bool { return o == w })
		} else {
			w := &waiter{key: key()}
			w.seq = l.seq + 1
			want := 0
			for _, o := range ref {
				if o.before(w) {
					want++
				}
			}
			require.Equal(t, want, l.orderPlace(w), "step %d: the newcomer's place", i)
			l.orderInsert(w)
			ref = slices.Insert(ref, want, w)
		}
		require.Equal(t, len(ref), l.order.size(), "step %d", i)
		if len(ref) == 0 {
			require.Nil(t, l.orderFirst())
			continue
		}
		require.Same(t, ref[0], l.orderFirst(), "step %d: the call served first", i)
	}
	for _, w := range ref {
		l.orderRemove(w)
	}
	require.Nil(t, l.order)
}
