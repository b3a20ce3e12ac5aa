package test

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

// provider is a fake OpenAI-compatible chat completions endpoint. While the
// request offers tools and fewer than turns tool results are in the
// conversation, it answers with a call of the tool toolFor names; then (or
// when the request offers no tools: the final call) with a text answer.
type provider struct {
	turns   int
	toolFor func(turn int) string
	// reject, when set, may answer request n (1-based) with an error status
	// and headers instead.
	reject func(n int) (status int, header http.Header)
	// latency is how long each answer takes (it honours the request's
	// context).
	latency time.Duration
	// latencyFor, when set, is the latency of request n (1-based) instead.
	latencyFor func(n int) time.Duration

	mu     sync.Mutex
	n      int
	starts []callStart
}

// callStart is what a call saw when it started.
type callStart struct {
	what      string        // "chat" or the tool's name
	at        time.Time     // when
	remaining time.Duration // the run's budget left (deadline.FromContext)
	hasBudget bool
	tools     int // tools the request offered (chat)
}

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role string `json:"role"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, ok := deadline.FromContext(r.Context())
	p.mu.Lock()
	p.n++
	n := p.n
	p.starts = append(p.starts, callStart{what: "chat", at: time.Now(), remaining: d.Remaining(), hasBudget: ok, tools: len(req.Tools)})
	p.mu.Unlock()
	if p.reject != nil {
		if status, h := p.reject(n); status != 0 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			fmt.Fprintf(w, `{"error":{"message":"rate limited","type":"requests","code":"rate_limit_exceeded"}}`)
			return
		}
	}
	lat := p.latency
	if p.latencyFor != nil {
		lat = p.latencyFor(n)
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
	done := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			done++
		}
	}
	msg := map[string]any{"role": "assistant"}
	finish := "stop"
	switch {
	case len(req.Tools) == 0:
		msg["content"] = fmt.Sprintf("final answer after %d tool calls", done)
	case done >= p.turns:
		msg["content"] = fmt.Sprintf("answer after %d tool calls", done)
	default:
		finish = "tool_calls"
		msg["content"] = ""
		msg["tool_calls"] = []map[string]any{{
			"id": fmt.Sprintf("call_%d", done+1), "type": "function",
			"function": map[string]any{"name": p.toolFor(done + 1), "arguments": `{"q":"x"}`},
		}}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 0, "model": req.Model,
		"choices": []map[string]any{{"index": 0, "message": msg, "finish_reason": finish}},
		"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
	})
}

func (p *provider) requests() []callStart {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]callStart(nil), p.starts...)
}

// memTransport serves the provider's handler in memory, for runs inside a
// synctest bubble (where a loopback socket would not let virtual time
// advance): the same handler httptest.Server serves on loopback, without the
// socket. Like net/http, it returns the context's error when the request's
// context ended before the answer.
type memTransport struct{ h http.Handler }

func (t memTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, req)
	if err := req.Context().Err(); err != nil {
		return nil, context.Cause(req.Context())
	}
	return rec.Result(), nil
}
