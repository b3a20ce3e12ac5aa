//go:build !linux

package overload

import "time"

// threadCPU falls back to the wall clock where the thread's CPU clock is not
// read.
func threadCPU() time.Duration { return time.Duration(time.Now().UnixNano()) }
