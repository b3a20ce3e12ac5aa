package deadlinehttp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
)

// TestRepeatable: the codes the network stack of this OS returns for a
// refused, reset or aborted connection (listed independently in
// connErrnos, per OS) are repeatable however they are wrapped; other errors
// are not.
func TestRepeatable(t *testing.T) {
	wrap := func(errno syscall.Errno) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", errno)}
	}
	for name, errno := range connErrnos {
		if !repeatable(wrap(errno)) {
			t.Errorf("%s (%d) wrapped in a *net.OpError is not repeatable", name, uintptr(errno))
		}
		if !repeatable(fmt.Errorf("attempt: %w", wrap(errno))) {
			t.Errorf("%s (%d) wrapped twice is not repeatable", name, uintptr(errno))
		}
	}
	for _, err := range []error{io.EOF, io.ErrUnexpectedEOF, fmt.Errorf("read: %w", io.EOF)} {
		if !repeatable(err) {
			t.Errorf("%v is not repeatable", err)
		}
	}
	for _, err := range []error{errors.New("tls: bad certificate"), context.DeadlineExceeded, context.Canceled, wrap(syscall.EACCES)} {
		if repeatable(err) {
			t.Errorf("%v is repeatable", err)
		}
	}
}
