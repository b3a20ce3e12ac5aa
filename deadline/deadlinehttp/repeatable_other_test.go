//go:build !windows

package deadlinehttp

import "syscall"

var connErrnos = map[string]syscall.Errno{
	"ECONNREFUSED": syscall.ECONNREFUSED,
	"ECONNRESET":   syscall.ECONNRESET,
	"ECONNABORTED": syscall.ECONNABORTED,
	"EPIPE":        syscall.EPIPE,
}
