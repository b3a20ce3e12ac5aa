package cputime

import (
	"syscall"
	"time"
	"unsafe"
)

func thread() time.Duration {
	const clockThreadCPUTimeID = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return wall()
	}
	return time.Duration(ts.Nano())
}
