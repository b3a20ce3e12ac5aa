package agenttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/deadlinebudget/budget/deadline"
)

// Provider is a fake OpenAI-compatible chat completions endpoint. While the
// request offers tools and fewer than Turns tool results are in the
// conversation, it answers with one call of the tool ToolFor names (default
// "lookup"); then, or when the request offers no tools (the reserve's final
// call, "final"), with a text answer (Answer). Each answer takes Latency (or
// LatencyOf's), honouring the request's context. The zero Provider answers
// at once, with no tool turn.
type Provider struct {
	Turns int
	// ToolFor names the tool of turn n (1-based); nil: "lookup".
	ToolFor func(turn int) string
	// Args is the JSON arguments of turn n's tool call; nil: {"q":"n"}.
	Args func(turn int) string
	// Latency is how long each answer takes; LatencyOf, when set, the
	// latency of request n (1-based) instead.
	Latency   time.Duration
	LatencyOf func(n int) time.Duration
	// Reject, when set, may answer request n (1-based) with an error
	// status and headers instead (a 429 with retry-after-ms, say).
	Reject func(n int) (status int, header http.Header)
	// Model is the response's model; "": the request's.
	Model string
	// NoFingerprint leaves system_fingerprint out of the answers (Genkit's
	// compat_oai then reports neither the response's id nor its model).
	NoFingerprint bool
	// Answer is the text of an answer after results tool results; final
	// reports a request without tools. Nil: "answer from N results" and
	// "final answer from N results".
	Answer func(results int, final bool) string

	mu     sync.Mutex
	n      int
	starts []CallStart
}

// CallStart is what a call saw when it started.
type CallStart struct {
	What      string        // "chat" or the tool's name
	At        time.Time     // when
	Remaining time.Duration // the request's budget (deadline.FromContext: its lease)
	HasBudget bool
	Tools     int // tools the request offered (chat)
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

// ServeHTTP answers one chat completion request.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var req chatRequest
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, ok := deadline.FromContext(r.Context())
	p.mu.Lock()
	p.n++
	n := p.n
	p.starts = append(p.starts, CallStart{What: "chat", At: time.Now(), Remaining: d.Remaining(), HasBudget: ok, Tools: len(req.Tools)})
	p.mu.Unlock()
	if p.Reject != nil {
		if status, h := p.Reject(n); status != 0 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = io.WriteString(w, `{"error":{"message":"rate limited","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
	}
	lat := p.Latency
	if p.LatencyOf != nil {
		lat = p.LatencyOf(n)
	}
	if lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	results := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	msg := map[string]any{"role": "assistant"}
	finish := "stop"
	if len(req.Tools) > 0 && results < p.Turns {
		turn := results + 1
		name, args := "lookup", fmt.Sprintf(`{"q":"%d"}`, turn)
		if p.ToolFor != nil {
			name = p.ToolFor(turn)
		}
		if p.Args != nil {
			args = p.Args(turn)
		}
		finish = "tool_calls"
		msg["content"] = ""
		msg["tool_calls"] = []map[string]any{{
			"id": fmt.Sprintf("call_%d", turn), "type": "function",
			"function": map[string]any{"name": name, "arguments": args},
		}}
	} else {
		final := len(req.Tools) == 0
		if p.Answer != nil {
			msg["content"] = p.Answer(results, final)
		} else if final {
			msg["content"] = fmt.Sprintf("final answer from %d results", results)
		} else {
			msg["content"] = fmt.Sprintf("answer from %d results", results)
		}
	}
	model := p.Model
	if model == "" {
		model = req.Model
	}
	out := map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1, "model": model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	}
	if !p.NoFingerprint {
		out["system_fingerprint"] = "fp"
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Requests returns what each request saw when it arrived, in order.
func (p *Provider) Requests() []CallStart {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]CallStart(nil), p.starts...)
}

// Reset forgets the requests seen, for a Provider reused across runs.
func (p *Provider) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n, p.starts = 0, nil
}

// MemTransport serves a handler in memory, for runs inside a synctest
// bubble (where a loopback socket would not let virtual time advance): the
// same exchange httptest.Server serves on loopback, without the socket.
// Like net/http, it returns the context's cause when the request's context
// ended before the answer.
type MemTransport struct{ H http.Handler }

// RoundTrip serves req with the handler.
func (t MemTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	rec := httptest.NewRecorder()
	t.H.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, context.Cause(req.Context())
	}
	resp := rec.Result()
	resp.Request = req
	return resp, nil
}
