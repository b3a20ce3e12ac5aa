package test

import (
	"syscall"
	"time"
	"unsafe"
)

// processCPU returns the CPU time the process has used, every thread
// included (CLOCK_PROCESS_CPUTIME_ID). Unlike wall time it does not count
// the time other processes on a shared machine held the CPU.
func processCPU() time.Duration {
	const clockProcessCPUTimeID = 2
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockProcessCPUTimeID, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		return time.Duration(time.Now().UnixNano())
	}
	return time.Duration(ts.Nano())
}
