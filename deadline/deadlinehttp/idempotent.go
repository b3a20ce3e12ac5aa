package deadlinehttp

import "net/http"

// IsIdempotent reports whether repeating req is harmless by RFC 9110
// §9.2.2: its method is GET, HEAD, OPTIONS, TRACE, PUT or DELETE (an empty
// method means GET), or its header map holds an Idempotency-Key or
// X-Idempotency-Key entry. As in net/http, the entry counts even when its
// value list is empty (net/http then sends no such header).
//
// It says nothing about the body: a request whose body cannot be replayed
// (no GetBody) is still never retried by the [Transport].
func IsIdempotent(req *http.Request) bool {
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace,
		http.MethodPut, http.MethodDelete:
		return true
	}
	_, key := req.Header["Idempotency-Key"]
	_, xkey := req.Header["X-Idempotency-Key"]
	return key || xkey
}

// replayable reports whether req's body can be sent again: it has none, or
// GetBody makes a fresh copy.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// retrySafe reports whether the transport may send req more than once.
func retrySafe(req *http.Request) bool {
	return IsIdempotent(req) && replayable(req)
}
