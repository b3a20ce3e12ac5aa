package deadlinemcpgo

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/mcpbudget"
)

// Transport returns inner, an mcp-go client transport (stdio, streamable
// HTTP, SSE, in-process), with every request sent under the client's
// budget rules; see [Client]. Give the result to client.NewClient. The
// wrapper has the optional interfaces inner has, as mcp-go's own
// transport.NewLogging does: transport.BidirectionalInterface (requests
// from the server, such as sampling) and transport.HTTPConnection (the
// negotiated protocol version), so that the mcp-go client behaves as it
// does with inner itself; SetConnectionLostHandler and
// RequiresLegacyProtocol are passed on when inner has them. Wrap one
// transport once, for one mcp-go client. A nil inner panics; nil options
// are ignored.
//
// The params of a request inner is given are the Client's, reused for a
// later request once its SendRequest returns: inner must have written
// them by then (mcp-go's transports marshal a request before they send
// it), and must not keep them.
func (c *Client) Transport(inner transport.Interface, opts ...TransportOption) transport.Interface {
	if inner == nil {
		panic("deadlinemcpgo: Client.Transport(nil)")
	}
	base := &budgetTransport{c: c, inner: inner, send: inner.SendRequest}
	for _, o := range opts {
		if o != nil {
			base.send = o.wrap(base.send)
		}
	}
	bidir, isBidir := inner.(transport.BidirectionalInterface)
	httpConn, isHTTP := inner.(transport.HTTPConnection)
	switch {
	case isBidir && isHTTP:
		return &bidirHTTPTransport{bidirTransport{base, bidir}, httpConn}
	case isBidir:
		return &bidirTransport{base, bidir}
	case isHTTP:
		return &httpTransport{base, httpConn}
	}
	return base
}

// budgetTransport is the wrapper of a transport that has only
// transport.Interface.
type budgetTransport struct {
	c     *Client
	inner transport.Interface
	send  SendFunc // inner.SendRequest, wrapped by WithAttemptMiddleware
	// names interns the tool names of the requests whose params come as
	// raw members (protocol 2026-07-28's): a call to a tool named before
	// takes its name from here, not from a conversion of the request's
	// bytes. Copied on write; at most maxToolNames.
	names atomic.Pointer[map[string]string]
}

// maxToolNames is how many tool names a wrapped transport interns: the
// tools of one session, as a rule; a name beyond them is converted per
// call.
const maxToolNames = 256

// SendFunc sends one attempt of a request and waits for its answer, as
// transport.Interface's SendRequest.
type SendFunc func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error)

// TransportOption configures [Client.Transport].
type TransportOption interface{ wrap(SendFunc) SendFunc }

type attemptMiddleware func(SendFunc) SendFunc

func (m attemptMiddleware) wrap(next SendFunc) SendFunc { return m(next) }

// WithAttemptMiddleware wraps the sending of each attempt with mw: it is
// called with the attempt's context (its deadline the lease) and request
// (a retry's with its own ID), whose Params implement [MetaSetter], before
// the inner transport writes it. otelbudgetmcpgo starts its CLIENT span
// there. Later options wrap earlier ones. A nil mw adds nothing.
func WithAttemptMiddleware(mw func(SendFunc) SendFunc) TransportOption {
	if mw == nil {
		return nil
	}
	return attemptMiddleware(mw)
}

// MetaSetter is implemented by the params of a request a [Client]'s
// transport sends: SetMeta adds key to the attempt's _meta (a trace
// context's traceparent), beside the budget, for this attempt only.
type MetaSetter interface{ SetMeta(key, value string) }

// Start starts the inner transport.
func (t *budgetTransport) Start(ctx context.Context) error { return t.inner.Start(ctx) }

// SendNotification sends a notification as it is, without a budget.
func (t *budgetTransport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	return t.inner.SendNotification(ctx, n)
}

// SetNotificationHandler sets the inner transport's handler.
func (t *budgetTransport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.inner.SetNotificationHandler(h)
}

// Close closes the inner transport.
func (t *budgetTransport) Close() error { return t.inner.Close() }

// GetSessionId returns the inner transport's session ID.
func (t *budgetTransport) GetSessionId() string { return t.inner.GetSessionId() }

// RequiresLegacyProtocol reports what the inner transport does (a
// streamable HTTP transport that listens continuously rules out protocol
// 2026-07-28), false when it does not say.
func (t *budgetTransport) RequiresLegacyProtocol() bool {
	l, ok := t.inner.(interface{ RequiresLegacyProtocol() bool })
	return ok && l.RequiresLegacyProtocol()
}

// SetConnectionLostHandler passes h to the inner transport when it takes
// one (SSE); otherwise it does nothing.
func (t *budgetTransport) SetConnectionLostHandler(h func(error)) {
	if s, ok := t.inner.(interface{ SetConnectionLostHandler(func(error)) }); ok {
		s.SetConnectionLostHandler(h)
	}
}

// SendRequest sends req under the client's budget rules; see [Client].
func (t *budgetTransport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	if mcpbudget.Notification(req.Method) {
		return t.inner.SendRequest(ctx, req)
	}
	c := t.c
	tool := ""
	if req.Method == "tools/call" {
		tool = t.toolName(req.Params)
	}
	p := c.core.Policy(ctx, req.Method, tool, t.safe(req.Method, tool))
	params := c.getParams(req.Params)
	params.tool = tool
	defer c.putParams(params)
	id := req.ID
	req.Params = params
	resp, err := deadline.Do(ctx, c.core.Deadline(ctx), p, func(actx context.Context, info deadline.AttemptInfo) (*transport.JSONRPCResponse, error) {
		if info.Number > 1 {
			req.ID = retryID(id, info.Number)
		}
		params.ms, params.extra = mcpbudget.Meta(actx), params.extra[:0]
		resp, err := t.send(actx, req)
		if err != nil {
			if !closed(err) {
				// No answer, and the request may have reached the server:
				// the lease ended (the SSE transport's own timer fires as
				// the context's deadline comes, before the context ends),
				// or the transport failed on the way back.
				t.cancel(ctx, req)
			}
			return nil, mark(err)
		}
		if resp.Error != nil {
			return nil, AnswerError(resp.Error)
		}
		return resp, nil
	})
	if err != nil {
		return nil, err
	}
	if req.Method == "tools/list" {
		t.observe(resp.Result)
	}
	resp.ID = id
	return resp, nil
}

// toolName returns [ToolName] of a tools/call request's params, interned
// (see budgetTransport.names) when they are raw members naming the tool
// with a plain string.
func (t *budgetTransport) toolName(params any) string {
	m, ok := params.(map[string]json.RawMessage)
	if !ok {
		return ToolName(params)
	}
	raw, ok := plainName(m)
	if !ok {
		return ToolName(params)
	}
	var known map[string]string
	old := t.names.Load()
	if old != nil {
		known = *old
		if name, ok := known[string(raw)]; ok {
			return name
		}
	}
	name := string(raw)
	if len(known) < maxToolNames {
		next := make(map[string]string, len(known)+1)
		maps.Copy(next, known)
		next[name] = name
		t.names.CompareAndSwap(old, &next) // a lost race leaves the name to the next call
	}
	return name
}

// safe reports whether a request may be sent more than once.
func (t *budgetTransport) safe(method, tool string) bool {
	if method == "tools/call" {
		return tool != "" && (t.c.core.IdempotentTool(tool) || t.c.hints.Safe(t, tool))
	}
	return mcpbudget.SafeMethod(method)
}

// observe records the hints of one page of a tools/list result.
func (t *budgetTransport) observe(result json.RawMessage) {
	var l listedTools
	if json.Unmarshal(result, &l) != nil {
		return
	}
	for _, tool := range l.Tools {
		a := tool.Annotations
		t.c.hints.Observe(t, tool.Name, a != nil && a.ReadOnlyHint != nil && *a.ReadOnlyHint,
			a != nil && a.IdempotentHint != nil && *a.IdempotentHint)
	}
}

// cancel tells the server to stop working on req, whose attempt's context
// ended before its answer: MCP's notifications/cancelled, best effort,
// waiting at most [CancelWait]. The handshake is never cancelled (MCP
// forbids it).
func (t *budgetTransport) cancel(ctx context.Context, req transport.JSONRPCRequest) {
	if mcpbudget.Handshake(req.Method) {
		return
	}
	ctx, stop := context.WithTimeout(context.WithoutCancel(ctx), CancelWait)
	defer stop()
	_ = t.inner.SendNotification(ctx, mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": req.ID, "reason": "deadline budget: the attempt's lease ended"}},
		},
	})
}

// budgetParams are a request's params as sent: the caller's, with the
// attempt's budget (ms) under key in their _meta. They are written when
// the transport marshals the request; the caller's params are not changed.
// They are the Client's, reused from one request to the next (with the
// buffer they are written into): a wrapped transport must be done with
// them when its SendRequest returns, as mcp-go's own transports are (each
// marshals the request before it sends it).
type budgetParams struct {
	inner    any
	tool     string // the tool a tools/call names, as the transport read it
	key      string
	keyBytes []byte // key, for bytes.Contains without a conversion per request
	quoted   []byte // key as a JSON string, quoted once per Client
	ms       int64
	extra    []string // key, value, … set by SetMeta for the attempt
	buf      []byte   // what MarshalJSON wrote last; encoding/json copies it
	// The caller's typed params as encoding/json writes them, into a
	// buffer kept with the params (enc writes into encBuf).
	encBuf bytes.Buffer
	enc    *json.Encoder
}

// maxKeptParams is the largest buffer a budgetParams keeps for the next
// request: a request with large arguments does not pin its buffer.
const maxKeptParams = 16 << 10

// getParams returns the budgetParams of one request whose params are inner.
func (c *Client) getParams(inner any) *budgetParams {
	p, _ := c.params.Get().(*budgetParams)
	if p == nil {
		p = &budgetParams{key: c.core.Key(), keyBytes: c.key, quoted: c.quoted}
	}
	p.inner = inner
	return p
}

// putParams keeps p for another request.
func (c *Client) putParams(p *budgetParams) {
	p.inner, p.tool, p.ms, p.extra = nil, "", 0, p.extra[:0]
	if cap(p.buf) > maxKeptParams {
		p.buf = nil
	}
	if p.encBuf.Cap() > maxKeptParams {
		p.encBuf, p.enc = bytes.Buffer{}, nil
	}
	c.params.Put(p)
}

// SetMeta adds key (not the budget's) to the attempt's _meta.
func (p *budgetParams) SetMeta(key, value string) {
	if key != p.key {
		p.extra = append(p.extra, key, value)
	}
}

// MarshalJSON writes the caller's params with the budget in their _meta:
// {"_meta":{key:ms}} for none, the key added to the _meta they have, or a
// _meta added to them.
func (p *budgetParams) MarshalJSON() ([]byte, error) {
	if m, ok := p.inner.(map[string]json.RawMessage); ok {
		if out, ok := p.rawMap(m); ok {
			return out, nil
		}
	}
	var b []byte
	if p.inner != nil {
		if p.enc == nil {
			p.enc = json.NewEncoder(&p.encBuf)
		}
		p.encBuf.Reset()
		if err := p.enc.Encode(p.inner); err != nil { // json.Marshal's bytes and a newline
			return nil, err
		}
		b = p.encBuf.Bytes()
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || string(b) == "null" || string(b) == "{}" {
		p.buf = p.meta(p.buf[:0])
		return p.buf, nil
	}
	if b[0] != '{' {
		return b, nil // not an object: no _meta can be carried (JSON-RPC allows an array)
	}
	if !bytes.Contains(b, []byte(`"_meta"`)) {
		out := p.meta(slices.Grow(p.buf[:0], len(b)+len(p.quoted)+32))
		out[len(out)-1] = ','
		p.buf = append(out, b[1:]...)
		return p.buf, nil
	}
	if i := metaObject(b); i > 0 && !bytes.Contains(b, p.keyBytes) {
		// The _meta object the caller (or mcp-go, for protocol 2026-07-28)
		// wrote: the budget spliced in after its brace.
		out := slices.Grow(p.buf[:0], len(b)+len(p.quoted)+32)
		out = append(out, b[:i]...)
		out = p.members(out)
		if b[i] != '}' {
			out = append(out, ',')
		}
		p.buf = append(out, b[i:]...)
		return p.buf, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := fields["_meta"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &meta); err != nil {
			return b, nil // a _meta that is not an object: sent as the caller wrote it
		}
	}
	meta[p.key] = strconv.AppendInt(nil, p.ms, 10)
	for i := 0; i+1 < len(p.extra); i += 2 {
		meta[p.extra[i]] = appendJSONString(nil, p.extra[i+1])
	}
	m, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	fields["_meta"] = m
	return json.Marshal(fields)
}

// rawMap writes params mcp-go gives as a map of raw members (protocol
// 2026-07-28's requests) without decoding them: the members in key order,
// as encoding/json writes a map, the budget spliced into the _meta object.
// It reports false when it cannot (a _meta that is not an object, or that
// holds the key already), for MarshalJSON's general path.
func (p *budgetParams) rawMap(m map[string]json.RawMessage) ([]byte, bool) {
	meta, hasMeta := m["_meta"]
	if t := bytes.TrimSpace(meta); hasMeta && (len(t) == 0 || t[0] != '{' || bytes.Contains(t, p.keyBytes)) {
		return nil, false
	}
	var small [8]string // a request's params have a handful of members: sorted on the stack
	keys := small[:0]
	n := 64 + len(p.key)
	for k, v := range m {
		keys = append(keys, k)
		n += len(k) + len(v) + 4
	}
	if !hasMeta {
		keys = append(keys, "_meta")
	}
	slices.Sort(keys)
	out := slices.Grow(p.buf[:0], n)
	out = append(out, '{')
	for i, k := range keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendJSONString(out, k)
		out = append(out, ':')
		if k != "_meta" {
			out = append(out, bytes.TrimSpace(m[k])...)
			continue
		}
		out = append(out, '{')
		out = p.members(out)
		if inner := bytes.TrimSpace(meta); len(inner) > 2 {
			out = append(out, ',')
			out = append(out, inner[1:]...)
		} else {
			out = append(out, '}')
		}
	}
	p.buf = append(out, '}')
	return p.buf, true
}

// meta appends {"_meta":{"key":ms, extra…}} to dst.
func (p *budgetParams) meta(dst []byte) []byte {
	dst = append(dst, `{"_meta":{`...)
	dst = p.members(dst)
	return append(dst, "}}"...)
}

// members appends "key":ms, extra… (no braces) to dst.
func (p *budgetParams) members(dst []byte) []byte {
	dst = append(dst, p.quoted...)
	dst = append(dst, ':')
	dst = strconv.AppendInt(dst, p.ms, 10)
	for i := 0; i+1 < len(p.extra); i += 2 {
		dst = append(dst, ',')
		dst = appendJSONString(dst, p.extra[i])
		dst = append(dst, ':')
		dst = appendJSONString(dst, p.extra[i+1])
	}
	return dst
}

// metaObject returns the index just after the opening brace of the
// top-level "_meta" member's object in b, a JSON object as encoding/json
// writes it, or -1 when it has none or its value is not an object.
func metaObject(b []byte) int {
	depth, inString, escaped, keyStart := 0, false, false, -1
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				if depth == 1 && keyStart >= 0 && string(b[keyStart:i+1]) == `"_meta"` &&
					i+2 < len(b) && b[i+1] == ':' && b[i+2] == '{' {
					return i + 3
				}
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			keyStart = -1
			if depth == 1 && (b[i-1] == '{' || b[i-1] == ',') {
				keyStart = i
			}
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	return -1
}

// bidirTransport adds transport.BidirectionalInterface.
type bidirTransport struct {
	*budgetTransport
	bidir transport.BidirectionalInterface
}

// SetRequestHandler sets the inner transport's handler of the server's
// requests.
func (t *bidirTransport) SetRequestHandler(h transport.RequestHandler) { t.bidir.SetRequestHandler(h) }

// httpTransport adds transport.HTTPConnection.
type httpTransport struct {
	*budgetTransport
	http transport.HTTPConnection
}

// SetProtocolVersion passes the negotiated version to the inner transport.
func (t *httpTransport) SetProtocolVersion(v string) { t.http.SetProtocolVersion(v) }

// bidirHTTPTransport adds both.
type bidirHTTPTransport struct {
	bidirTransport
	http transport.HTTPConnection
}

// SetProtocolVersion passes the negotiated version to the inner transport.
func (t *bidirHTTPTransport) SetProtocolVersion(v string) { t.http.SetProtocolVersion(v) }

// appendJSONString appends s as a JSON string: as it is between quotes
// when it is printable ASCII with nothing to escape (a member's name, as a
// rule), Go's quoting where it is JSON's too (printable ASCII),
// encoding/json's otherwise.
func appendJSONString(dst []byte, s string) []byte {
	plain := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x7f:
			b, _ := json.Marshal(s)
			return append(dst, b...)
		case c == '"' || c == '\\':
			plain = false
		}
	}
	if !plain {
		return strconv.AppendQuote(dst, s)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}
