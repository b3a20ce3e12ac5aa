//go:build !windows

package deadlinehttp

import "syscall"

// repeatableErrnos are the POSIX codes of a connection refused, reset or
// aborted, and of a broken pipe.
var repeatableErrnos = [...]error{
	syscall.ECONNREFUSED,
	syscall.ECONNRESET,
	syscall.ECONNABORTED,
	syscall.EPIPE,
}
