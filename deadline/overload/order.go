package overload

// The overloaded order of a Limiter's queue: a treap (a binary search tree
// balanced by random priorities) of the waiting calls, ordered by their
// key and, on a tie, by arrival, each node counting the calls under it. It
// gives, each in O(log n) expected, the call served first (the largest
// key, the newest on a tie), a newcomer's place (how many are served
// before it) and the removal of any call (it leaves when its deadline
// passes). A heap served first in O(log n) too, but placing a newcomer
// scanned every waiting call, and admission's backlog at 10× overload holds
// about 1 600 of them.

// before reports whether a is served before b in the overloaded order: the
// largest key first (a call without a deadline, a zero key, last), the
// newest first on a tie.
func (a *waiter) before(b *waiter) bool {
	switch {
	case a.key.IsZero() != b.key.IsZero():
		return b.key.IsZero()
	case !a.key.Equal(b.key):
		return a.key.After(b.key)
	}
	return a.seq > b.seq
}

// size is how many calls t's tree holds.
func (t *waiter) size() int {
	if t == nil {
		return 0
	}
	return t.n
}

func (t *waiter) fix() { t.n = 1 + t.left.size() + t.right.size() }

// orderSplit splits t into the calls served before w and the others.
func orderSplit(t, w *waiter) (left, right *waiter) {
	if t == nil {
		return nil, nil
	}
	if t.before(w) {
		t.right, right = orderSplit(t.right, w)
		t.fix()
		return t, right
	}
	left, t.left = orderSplit(t.left, w)
	t.fix()
	return left, t
}

// orderMerge joins a and b, every call of a served before every call of b.
func orderMerge(a, b *waiter) *waiter {
	switch {
	case a == nil:
		return b
	case b == nil:
		return a
	case a.prio > b.prio:
		a.right = orderMerge(a.right, b)
		a.fix()
		return a
	}
	b.left = orderMerge(a, b.left)
	b.fix()
	return b
}

// orderInsert adds w to the order. Under the lock.
func (l *Limiter) orderInsert(w *waiter) {
	l.seq++
	// xorshift64: the priorities need only be unrelated to the keys.
	x := l.rnd
	x ^= x << 13
	x ^= x >> 7
	x ^= x << 17
	l.rnd = x
	w.seq, w.prio, w.left, w.right, w.n = l.seq, x, nil, nil, 1
	a, b := orderSplit(l.order, w)
	l.order = orderMerge(orderMerge(a, w), b)
}

// orderRemove takes w out of the order. Under the lock.
func (l *Limiter) orderRemove(w *waiter) {
	l.order = orderRemoveFrom(l.order, w)
	w.left, w.right = nil, nil
}

func orderRemoveFrom(t, w *waiter) *waiter {
	switch {
	case t == nil:
		return nil // not in the order
	case t == w:
		return orderMerge(t.left, t.right)
	case w.before(t):
		t.left = orderRemoveFrom(t.left, w)
	default:
		t.right = orderRemoveFrom(t.right, w)
	}
	t.fix()
	return t
}

// orderFirst returns the call served first, nil if none waits. Under the
// lock.
func (l *Limiter) orderFirst() *waiter {
	t := l.order
	if t == nil {
		return nil
	}
	for t.left != nil {
		t = t.left
	}
	return t
}

// orderLast returns the call served last, nil if none waits. Under the
// lock.
func (l *Limiter) orderLast() *waiter {
	t := l.order
	if t == nil {
		return nil
	}
	for t.right != nil {
		t = t.right
	}
	return t
}

// orderPlace returns how many waiting calls would be served before a
// newcomer w (not in the order). Under the lock.
func (l *Limiter) orderPlace(w *waiter) int {
	n := 0
	for t := l.order; t != nil; {
		if t.before(w) {
			n += 1 + t.left.size()
			t = t.right
		} else {
			t = t.left
		}
	}
	return n
}
