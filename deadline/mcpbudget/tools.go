package mcpbudget

import (
	"runtime"
	"sync"
	"weak"
)

// ToolHints holds, per client session S (the SDK's session or client
// type), the tools its tools/list results declared safe to repeat
// ([SafeTool]). A session's entry goes when the session is garbage
// collected: the map is keyed by a weak pointer, and a cleanup attached to
// the session deletes the entry, so a client serving many short sessions
// does not grow. The zero ToolHints is empty and ready; it is safe for
// concurrent use and must not be copied after first use.
type ToolHints[S any] struct {
	sessions sync.Map // weak.Pointer[S] -> *sessionTools
}

type sessionTools struct {
	mu   sync.RWMutex
	safe map[string]bool // tool name -> readOnlyHint || idempotentHint
}

// Safe reports whether session listed the tool name with readOnlyHint or
// idempotentHint. A nil session has listed nothing.
func (c *ToolHints[S]) Safe(session *S, name string) bool {
	if session == nil {
		return false
	}
	v, ok := c.sessions.Load(weak.Make(session))
	if !ok {
		return false
	}
	t := v.(*sessionTools)
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.safe[name]
}

// Observe records one tool of one page of session's tools/list result. A
// tool listed again replaces what was known of it: a tool whose
// annotations are gone is no longer safe. A nil session records nothing.
func (c *ToolHints[S]) Observe(session *S, name string, readOnly, idempotent bool) {
	if session == nil {
		return
	}
	k := weak.Make(session)
	v, ok := c.sessions.Load(k)
	if !ok {
		var loaded bool
		v, loaded = c.sessions.LoadOrStore(k, &sessionTools{safe: make(map[string]bool)})
		if !loaded {
			runtime.AddCleanup(session, func(k weak.Pointer[S]) { c.sessions.Delete(k) }, k)
		}
	}
	t := v.(*sessionTools)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.safe[name] = SafeTool(readOnly, idempotent)
}
