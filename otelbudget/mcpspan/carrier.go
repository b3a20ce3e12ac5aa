package mcpspan

// MetaCarrier lets a TextMapPropagator read and write a request's _meta,
// where MCP's semantic conventions carry the trace context (traceparent,
// tracestate: keys without a prefix, as the W3C names them). A nil
// MetaCarrier reads nothing; Set on it panics, as on a nil map.
type MetaCarrier map[string]any

// Get returns the string value of key, "" for none or a value that is not
// a string.
func (m MetaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

// Set sets key to value.
func (m MetaCarrier) Set(key, value string) { m[key] = value }

// Keys returns the keys of m.
func (m MetaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
