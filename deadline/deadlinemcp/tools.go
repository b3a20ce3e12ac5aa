package deadlinemcp

import (
	"runtime"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolCache holds, per client session, the tools its tools/list results
// declared safe to repeat. A session's entry goes when the session is
// garbage collected: the map is keyed by a weak pointer, and a cleanup
// attached to the session deletes the entry, so a Client serving many
// short sessions does not grow.
type toolCache struct {
	sessions sync.Map // weak.Pointer[mcp.ClientSession] -> *sessionTools
}

type sessionTools struct {
	mu   sync.RWMutex
	safe map[string]bool // tool name -> readOnlyHint || idempotentHint
}

// safe reports whether session listed the tool name with readOnlyHint or
// idempotentHint.
func (c *toolCache) safe(session *mcp.ClientSession, name string) bool {
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

// observe records one page of session's tools/list result. A tool listed
// again replaces what was known of it: a tool whose annotations are gone
// (nil) is no longer safe.
func (c *toolCache) observe(session *mcp.ClientSession, tools []*mcp.Tool) {
	k := weak.Make(session)
	v, ok := c.sessions.Load(k)
	if !ok {
		var loaded bool
		v, loaded = c.sessions.LoadOrStore(k, &sessionTools{safe: make(map[string]bool, len(tools))})
		if !loaded {
			runtime.AddCleanup(session, func(k weak.Pointer[mcp.ClientSession]) { c.sessions.Delete(k) }, k)
		}
	}
	t := v.(*sessionTools)
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, tool := range tools {
		if tool == nil {
			continue
		}
		a := tool.Annotations
		t.safe[tool.Name] = a != nil && (a.ReadOnlyHint || a.IdempotentHint)
	}
}
