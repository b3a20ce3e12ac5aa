package deadlinemcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// HTTPHandler returns next, the SDK's streamable HTTP handler
// (mcp.NewStreamableHTTPHandler) of servers that use s's [Server.Middleware],
// behind a filter that applies to a repeated _meta budget the rule
// deadlinehttp applies to a repeated Deadline-Budget-Ms header: the
// smallest valid value wins, so that a proxy that adds a value can lower a
// budget, never raise it.
//
// JSON leaves repeated object keys to the reader; encoding/json, and the
// SDK, keep the last value of a repeated key ({"k": 50, "k": 999999} reads
// 999999, which the maximum then clamps), and merge a repeated _meta
// object into the first. For each JSON-RPC request of a POST body (one
// message or a batch) whose params' _meta objects hold the budget key
// ([MetaKey], [WithInboundMetaKey]) more than once, however its name is
// escaped, the filter rewrites the params so that the one _meta the SDK
// reads holds every key it would have read, and the budget key the
// smallest valid value ([NewServer] says which are valid); malformed
// values are ignored, and a request with no valid value is left as it is.
// Every other body goes through unchanged, byte for byte; a body larger
// than mcp.DefaultMaxRequestBodyBytes is not inspected. The filter reads
// the body before next does; a read error reaches next as it would have.
//
// Without HTTPHandler, and over the stdio and in-memory transports, whose
// messages this package never sees raw, the middleware reads the value the
// SDK decoded: the last.
//
// HTTPHandler also lets the middleware end a handler whose caller has
// gone on a stateless server (mcp.StreamableHTTPOptions.Stateless), where
// notifications/cancelled reaches another session and cancels nothing:
// each POST is served in a session of its own, without an ID, and the
// middleware cancels the context of a request that arrived in such a
// session when its POST ends (the client drops it when its call ends), on
// every protocol version, as PropagateRequestCancellation does for
// protocol 2026-07-28. The cause is context.Canceled. Requests of a
// stateful session are left to notifications/cancelled.
//
// A nil next panics.
func (s *Server) HTTPHandler(next http.Handler) http.Handler {
	if next == nil {
		panic("deadlinemcp: Server.HTTPHandler(nil)")
	}
	key := s.cfg.key
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Body != nil && r.Body != http.NoBody {
			r = smallestBudgetBody(r, key)
		}
		r = r.WithContext(context.WithValue(r.Context(), postKey{}, r.Context()))
		next.ServeHTTP(w, r)
	})
}

// postKey is the context key under which [Server.HTTPHandler] stores the
// context of the HTTP request that carries an MCP request.
type postKey struct{}

// withCallerGone returns ctx, also canceled when the HTTP request that
// carried req ends, when that request is known: the request came through
// [Server.HTTPHandler] to a session without an ID, which the SDK's
// stateless streamable HTTP handler opens for that one POST, with the
// POST's context (whose values reach the handler's). A stateful session
// has an ID, and its context is that of the POST that opened it, not of
// this request's: it is left alone (notifications/cancelled reaches it).
func withCallerGone(ctx context.Context, req mcp.Request) (context.Context, context.CancelFunc) {
	post, ok := ctx.Value(postKey{}).(context.Context)
	if !ok {
		return ctx, func() {}
	}
	if ss, ok := req.GetSession().(*mcp.ServerSession); !ok || ss == nil || ss.ID() != "" {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(post, cancel)
	return ctx, func() { stop(); cancel() }
}

// smallestBudgetBody returns r with its body read and, when a request in
// it repeats the budget key, rewritten (see [Server.HTTPHandler]).
func smallestBudgetBody(r *http.Request, key string) *http.Request {
	const limit = mcp.DefaultMaxRequestBodyBytes
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, limit+1))
	r = r.WithContext(r.Context()) // a shallow copy: the caller's request is not changed
	switch {
	case err != nil:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), errReader{err}), orig}
		return r
	case len(body) > limit:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), orig), orig}
		return r
	}
	if out, ok := smallestBudget(body, key); ok {
		body = out
		r.ContentLength = int64(len(body))
	}
	r.Body = readCloser{bytes.NewReader(body), orig}
	return r
}

type readCloser struct {
	io.Reader
	io.Closer
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// smallestBudget rewrites a JSON-RPC body (one message or a batch) so
// that each request's params carry the smallest valid budget of the
// repeated key, and reports whether it changed anything.
func smallestBudget(body []byte, key string) ([]byte, bool) {
	// No escape and fewer than two literal keys: no repetition possible.
	if !bytes.Contains(body, []byte{'\\'}) && bytes.Count(body, []byte(key)) < 2 {
		return body, false
	}
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) == 0 {
		return body, false
	}
	if trimmed[0] != '[' {
		return smallestInMessage(body, key)
	}
	var batch []json.RawMessage
	if json.Unmarshal(body, &batch) != nil {
		return body, false
	}
	changed := false
	for i, m := range batch {
		if out, ok := smallestInMessage(m, key); ok {
			batch[i], changed = out, true
		}
	}
	if !changed {
		return body, false
	}
	out, err := json.Marshal(batch)
	if err != nil {
		return body, false
	}
	return out, true
}

// smallestInMessage rewrites one JSON-RPC message's params; see
// [smallestBudget].
func smallestInMessage(msg []byte, key string) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return msg, false
	}
	params, ok := m["params"] // the last, as the SDK reads it
	if !ok {
		return msg, false
	}
	p, ok := smallestInParams(params, key)
	if !ok {
		return msg, false
	}
	m["params"] = p
	out, err := json.Marshal(m)
	if err != nil {
		return msg, false
	}
	return out, true
}

// smallestInParams returns params with every _meta object merged into one
// (later keys over earlier ones, as the SDK decodes them) whose budget key
// holds the smallest valid value any of them gave it, when the key occurs
// more than once and one of its values is valid.
func smallestInParams(params json.RawMessage, key string) (json.RawMessage, bool) {
	var metas, values []json.RawMessage
	err := eachMember(params, func(name string, v json.RawMessage) error {
		if name != "_meta" {
			return nil
		}
		metas = append(metas, v)
		return eachMember(v, func(name string, v json.RawMessage) error {
			if name == key {
				values = append(values, v)
			}
			return nil
		})
	})
	if err != nil || len(values) < 2 {
		return params, false
	}
	smallest := -1
	var least int64
	for i, v := range values {
		dec := json.NewDecoder(bytes.NewReader(v))
		dec.UseNumber()
		var x any
		if dec.Decode(&x) != nil {
			continue
		}
		d, kind := parseBudget(x, true)
		if kind != metaBudget && kind != metaHuge {
			continue
		}
		if smallest < 0 || int64(d) < least {
			smallest, least = i, int64(d)
		}
	}
	if smallest < 0 {
		return params, false // no valid value: malformed, as the SDK reads it
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil {
		return params, false
	}
	merged := make(map[string]json.RawMessage)
	for _, raw := range metas {
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil {
			return params, false // not an object: the SDK refuses these params
		}
		maps.Copy(merged, m)
	}
	merged[key] = values[smallest]
	meta, err := json.Marshal(merged)
	if err != nil {
		return params, false
	}
	p["_meta"] = meta
	out, err := json.Marshal(p)
	if err != nil {
		return params, false
	}
	return out, true
}

// eachMember calls f with the name (unescaped) and the raw value of every
// member of the JSON object obj, repeated names included, in order; it
// does nothing when obj is not an object.
func eachMember(obj json.RawMessage, f func(name string, v json.RawMessage) error) error {
	dec := json.NewDecoder(bytes.NewReader(obj))
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return nil
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return err
		}
		if err := f(name, v); err != nil {
			return err
		}
	}
	return nil
}
