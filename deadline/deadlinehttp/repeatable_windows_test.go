package deadlinehttp

import "syscall"

// The Windows Sockets codes, by number (golang.org/x/sys/windows), not
// syscall.ECONNREFUSED and friends, which Windows never returns.
var connErrnos = map[string]syscall.Errno{
	"WSAECONNREFUSED": 10061,
	"WSAECONNRESET":   10054,
	"WSAECONNABORTED": 10053,
}
