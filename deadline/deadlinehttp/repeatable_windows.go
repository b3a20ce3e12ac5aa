package deadlinehttp

import "syscall"

// repeatableErrnos are the Windows Sockets codes of a connection refused,
// reset or aborted. On Windows the syscall package's ECONNREFUSED,
// ECONNRESET, ECONNABORTED and EPIPE are invented values that the network
// stack never returns; it returns these WSAE* codes, as numbered in
// golang.org/x/sys/windows (zerrors_windows.go: WSAECONNABORTED = 10053,
// WSAECONNRESET = 10054, WSAECONNREFUSED = 10061), which this package does
// not import. A write on a reset connection fails with WSAECONNRESET or
// WSAECONNABORTED, so no broken-pipe code is needed.
var repeatableErrnos = [...]error{
	syscall.Errno(10061), // WSAECONNREFUSED
	syscall.Errno(10054), // WSAECONNRESET
	syscall.Errno(10053), // WSAECONNABORTED
}
