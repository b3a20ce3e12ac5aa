// Package cputime reads the calling thread's CPU clock for the benchmarks
// of package deadline and its subpackages: unlike wall time it does not
// count the time other processes on a shared machine held the CPU.
package cputime

import "time"

// Thread returns the CPU time the calling OS thread has used
// (CLOCK_THREAD_CPUTIME_ID on Linux; the wall clock elsewhere, or if the
// clock cannot be read). The caller must be locked to its thread
// (runtime.LockOSThread) for two readings to be comparable.
func Thread() time.Duration { return thread() }

func wall() time.Duration { return time.Duration(time.Now().UnixNano()) }
