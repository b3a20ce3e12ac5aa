package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/firebase/genkit/go/ai"
)

// provider is a fake OpenAI-compatible chat completions endpoint: it asks
// for the tool "lookup" until the conversation holds turns tool results,
// then answers; a request offering no tools (the reserve's final call) is
// answered from what it has. Each answer takes latency.
type provider struct {
	turns   int
	latency time.Duration
	n       atomic.Int32
}

func (p *provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := p.n.Add(1)
	var req struct {
		Messages []struct {
			Role string `json:"role"`
		} `json:"messages"`
		Tools []json.RawMessage `json:"tools"`
	}
	body, err := io.ReadAll(r.Body)
	if err == nil {
		err = json.Unmarshal(body, &req)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	select {
	case <-time.After(p.latency):
	case <-r.Context().Done():
		return
	}
	results := 0
	for _, m := range req.Messages {
		if m.Role == "tool" {
			results++
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if len(req.Tools) > 0 && results < p.turns {
		fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"fake-1","system_fingerprint":"fp","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":"","tool_calls":[{"id":"call_%d","type":"function","function":{"name":"lookup","arguments":"{\"q\":\"topic %d\"}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, n, results+1, results+1)
		return
	}
	text := fmt.Sprintf("a summary of %d sources", results)
	if len(req.Tools) == 0 && strings.Contains(string(body), "time budget") {
		text = fmt.Sprintf("a partial summary of %d sources (out of time)", results)
	}
	fmt.Fprintf(w, `{"id":"c%d","object":"chat.completion","created":1,"model":"fake-1","system_fingerprint":"fp","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, n, text)
}

// tool is "lookup": each call takes latency, honouring its context, but
// call slowAt (1-based) takes slow and ignores its context.
type tool struct {
	latency time.Duration
	slowAt  int
	slow    time.Duration
	n       atomic.Int32
}

type lookupIn struct {
	Q string `json:"q"`
}

func (t *tool) lookup(tc *ai.ToolContext, in lookupIn) (string, error) {
	if int(t.n.Add(1)) == t.slowAt {
		time.Sleep(t.slow) // hangs, whatever its context says
		return "late notes on " + in.Q, nil
	}
	select {
	case <-time.After(t.latency):
		return "notes on " + in.Q, nil
	case <-tc.Done():
		return "", context.Cause(tc)
	}
}
