package cputime

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestThreadAdvances(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	a := Thread()
	x := 0
	for i := range 5_000_000 {
		x += i
	}
	runtime.KeepAlive(x)
	assert.Greater(t, Thread(), a, "the thread's clock moves while it computes")
}
