package mcpbudget

import (
	"bytes"
	"encoding/json"
	"io"
	"maps"
	"net/http"
)

// SmallestRequest is [SmallestBody] for a request that has a body to read:
// a POST, whose body is neither nil nor http.NoBody. It returns any other r
// as it is. The SDK adapters' HTTP handlers call it first.
func SmallestRequest(r *http.Request, key string, limit int64) *http.Request {
	if r.Method != http.MethodPost || r.Body == nil || r.Body == http.NoBody {
		return r
	}
	return SmallestBody(r, key, limit)
}

// SmallestBody returns r with its body read and, when a JSON-RPC request
// in it repeats the budget key, rewritten by [Smallest]: a repeated key
// gives its smallest valid value, the rule deadlinehttp applies to a
// repeated Deadline-Budget-Ms header, so that a proxy that adds a value
// can lower a budget, never raise it. SDKs decode JSON with encoding/json,
// which keeps the last value of a repeated key; an SDK adapter's HTTP
// handler calls SmallestBody before the SDK reads the body.
//
// A body longer than limit bytes is not inspected: it reaches the SDK as
// it came, whose own limit answers it. A read error reaches the SDK as it
// would have, after the bytes read before it. r itself is not changed (a
// shallow copy is returned); the original body is closed with the new one.
func SmallestBody(r *http.Request, key string, limit int64) *http.Request {
	orig := r.Body
	body, err := io.ReadAll(io.LimitReader(orig, limit+1))
	r = r.WithContext(r.Context()) // a shallow copy: the caller's request is not changed
	switch {
	case err != nil:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), errReader{err}), orig}
		return r
	case int64(len(body)) > limit:
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), orig), orig}
		return r
	}
	if out, ok := Smallest(body, key); ok {
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

// Smallest rewrites a JSON-RPC body (one message or a batch) so that each
// request whose params' _meta objects hold key more than once, however its
// name is escaped, carries one _meta holding every key encoding/json would
// have read (later _meta objects merged over earlier ones) and, under key,
// the smallest valid value ([Parse]); malformed values are ignored, and a
// request with no valid value is left as it is. It reports whether it
// changed anything: when it did not, it returns body itself, byte for byte.
func Smallest(body []byte, key string) ([]byte, bool) {
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

// smallestInMessage rewrites one JSON-RPC message's params; see [Smallest].
func smallestInMessage(msg []byte, key string) ([]byte, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(msg, &m) != nil {
		return msg, false
	}
	params, ok := m["params"] // the last, as encoding/json reads it
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
// (later keys over earlier ones, as encoding/json decodes them) whose
// budget key holds the smallest valid value any of them gave it, when the
// key occurs more than once and one of its values is valid.
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
		d, kind := Parse(x, true)
		if kind != Budget && kind != Huge {
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
