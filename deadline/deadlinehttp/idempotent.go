package deadlinehttp

import (
	"net/http"
	"strings"
)

// IsIdempotent reports whether repeating req is harmless by RFC 9110
// §9.2.2: its method is GET, HEAD, OPTIONS, TRACE, PUT or DELETE (an empty
// method means GET), or it carries an idempotency key.
//
// A key is an Idempotency-Key or X-Idempotency-Key header entry that is
// either
//
//   - a value that is not empty (nor only spaces and tabs): the server
//     recognises a repeated request by it; or
//   - an entry with no value at all (req.Header["Idempotency-Key"] = nil):
//     net/http's own marker for "this request is idempotent, send no key"
//     (its Transport then sends no such header, and may replay the request
//     itself).
//
// An entry whose value is the empty string is not a key: the server could
// not tell a repeat from a new request, so a POST carrying it is sent once.
//
// It says nothing about the body: a request whose body cannot be replayed
// (no GetBody) is still never retried by the [Transport].
func IsIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	return isKey(req.Header, "Idempotency-Key") || isKey(req.Header, "X-Idempotency-Key")
}

// isKey reports whether h's entry for the canonical name is an idempotency
// key: present with no value, or with a first value (the one a server
// reads) that is not blank.
func isKey(h http.Header, name string) bool {
	v, ok := h[name]
	if !ok {
		return false
	}
	return len(v) == 0 || strings.Trim(v[0], " \t") != ""
}

// replayable reports whether req's body can be sent again: it has none, or
// GetBody makes a fresh copy.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}
