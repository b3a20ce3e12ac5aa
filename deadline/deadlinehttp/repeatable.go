package deadlinehttp

import (
	"errors"
	"io"
)

// repeatable reports whether a transport error shows the request can be
// sent again: the connection was refused, reset or aborted, the pipe broke
// (the operating system's codes for these are in repeatableErrnos, one set
// per OS), or it ended (EOF) before a response.
func repeatable(err error) bool {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	for _, errno := range repeatableErrnos {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}
