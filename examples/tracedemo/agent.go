package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/deadlinebudget/budget/deadline"
	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/otelbudget"
	"github.com/deadlinebudget/budget/otelbudget/otelbudgetmcp"
)

// transportAgent plays the plan through the agent's own stack
// (-transport agent): search is an MCP tool call to a local MCP server
// (the official go-sdk, streamable HTTP on 127.0.0.1), extract is a chat
// completion through the real openai-go client to a local fake LLM
// server, and fetch is the HTTP request it is over -transport http. The
// three run under the run's one deadline, in one trace.
const transportAgent = "agent"

// llmModel is the model name the agent asks the fake LLM server for.
const llmModel = "tracedemo-extract"

// executeAgent is execute over the agent's stack: it starts the providers
// of sc on 127.0.0.1 (search as an MCP server, extract as an
// OpenAI-compatible chat completions server, fetch as an HTTP provider),
// plays the plan against them, and stops them.
func executeAgent(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider) (outcome, error) {
	return executeOver(ctx, sc, seed, budget, tp, mp, (*providers).serveAgent, playAgent)
}

// playAgent is play over the agent's stack, against the servers at urls
// ("search": the MCP endpoint, "extract": the LLM API's base URL,
// "fetch": the HTTP provider), sending with base.
func playAgent(ctx context.Context, sc scenario, seed uint64, budget time.Duration, tp trace.TracerProvider, mp metric.MeterProvider, base http.RoundTripper, urls map[string]string) (runRecord, error) {
	return playOver(ctx, sc, seed, budget, tp, mp, playOptions{}, func(obs *otelbudget.Observer) (stepCaller, error) {
		return newAgentCaller(ctx, obs, base, urls)
	})
}

// serveAgent starts the agent stack's servers, one per provider, on
// ephemeral ports of 127.0.0.1. Call close to stop them.
func (ps *providers) serveAgent(tp trace.TracerProvider) error {
	for _, s := range agentPlan() {
		p := ps.byStep[s.name]
		var h http.Handler
		var err error
		switch s.name {
		case "search":
			h, err = p.mcpHandler(tp)
		case "extract":
			h, err = p.llmHandler(tp)
		default:
			h, err = p.handler(tp)
		}
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return fmt.Errorf("listen on 127.0.0.1 for the %s provider: %w", s.name, err)
		}
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		ps.servers = append(ps.servers, srv)
		ps.urls[s.name] = "http://" + ln.Addr().String()
		ps.wg.Go(func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				ps.mu.Lock()
				ps.serveErr = append(ps.serveErr, fmt.Errorf("the %s provider stopped serving: %w", s.name, err))
				ps.mu.Unlock()
			}
		})
	}
	return nil
}

// mcpHandler serves the provider as an MCP server with one read-only tool
// named after it, over streamable HTTP. otelbudgetmcp's server middleware
// starts a SERVER span per request (the child of the agent's attempt span,
// through the trace context in _meta), admits the _meta budget (clamped to
// serverMaxBudget) and makes it the tool handler's deadline.
func (p *provider) mcpHandler(tp trace.TracerProvider) (http.Handler, error) {
	obs := otelbudget.New(otelbudget.WithTracerProvider(tp), otelbudget.WithMeterProvider(metricnoop.NewMeterProvider()))
	mws, err := otelbudgetmcp.ServerMiddleware(obs,
		[]deadlinemcp.ServerOption{deadlinemcp.WithMaxBudget(serverMaxBudget)},
		otelbudgetmcp.WithPropagators(propagation.TraceContext{}))
	if err != nil {
		return nil, fmt.Errorf("the %s provider's MCP middleware: %w", p.name, err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "tracedemo-" + p.name, Version: "v1"}, nil)
	server.AddReceivingMiddleware(mws...)
	server.AddTool(&mcp.Tool{
		Name:        p.name,
		Description: "searches the web (a scripted provider)",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"q": map[string]any{"type": "string"}}},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, p.serveMCP)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil), nil
}

// serveMCP plays the provider's reply to one tool call, as ServeHTTP does
// for a request. It runs inside the budget middleware, so ctx ends when the
// lease the client sent in _meta runs out, or when the client cancels the
// request. A scripted error status is a tool result with isError.
func (p *provider) serveMCP(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	meta := req.Params.GetMeta()
	var budget time.Duration
	if ms, ok := meta[deadlinemcp.MetaKey].(float64); ok {
		budget = time.Duration(ms) * time.Millisecond
	}
	traceparent, _ := meta["traceparent"].(string)
	rep, n, err := p.play(ctx, seenRequest{Budget: budget, TraceParent: traceparent})
	if err != nil {
		return nil, err
	}
	if rep.failed() {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: http.StatusText(rep.status)}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p.answer(ctx, n)}}}, nil
}

// llmHandler serves the provider as an OpenAI-compatible chat completions
// endpoint, behind the same budget middleware and SERVER span as the HTTP
// providers: its replies follow the provider's script, in the shape the
// OpenAI API gives them (llmWriter).
func (p *provider) llmHandler(tp trace.TracerProvider) (http.Handler, error) {
	return p.handlerOver(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.ServeHTTP(&llmWriter{ResponseWriter: w}, r)
	}), tp)
}

// llmWriter turns a provider's answer into the OpenAI API's: its JSON body
// becomes the content of a chat completion, and an error status gets the
// API's error object ({"error": {"message", "type"}}), which the SDK reads
// into an *openai.Error. The provider writes its body once.
type llmWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *llmWriter) WriteHeader(code int) { w.status = code }

func (w *llmWriter) Write(b []byte) (int, error) {
	if w.wrote {
		return len(b), nil
	}
	w.wrote = true
	status := w.status
	if status == 0 {
		status = http.StatusOK
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("X-Content-Type-Options")
	w.ResponseWriter.WriteHeader(status)
	var body string
	if status == http.StatusOK {
		body = fmt.Sprintf(`{"id":"chatcmpl-tracedemo","object":"chat.completion","created":0,"model":%q,`+
			`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":%q}}],`+
			`"usage":{"prompt_tokens":12,"completion_tokens":9,"total_tokens":21}}`, llmModel, strings.TrimSpace(string(b)))
	} else {
		body = fmt.Sprintf(`{"error":{"message":%q,"type":"server_error","code":null,"param":null}}`, http.StatusText(status))
	}
	if _, err := w.ResponseWriter.Write([]byte(body + "\n")); err != nil {
		return 0, err
	}
	return len(b), nil
}

// agentCaller sends each step through the tool an agent uses for it: an
// MCP session for search, the openai-go client for extract, the shared
// HTTP client for fetch.
type agentCaller struct {
	session *mcp.ClientSession
	llm     openai.Client
	web     *httpCaller
}

// newAgentCaller connects the MCP session (initialize, then tools/list,
// from which the client learns that search is read-only, so safe to
// retry) and builds the openai-go client: its HTTP client is the run's
// budget transport composed with otelhttp (sharedTransport), its own
// retries are off (option.WithMaxRetries(0): the budget transport retries,
// inside the budget), and its base URL is the fake LLM server's. The
// session's setup runs before the run's deadline starts, as an agent
// connects to its tools before it is given a task: it is not traced
// (setupContext), so that the run is one trace.
func newAgentCaller(ctx context.Context, obs *otelbudget.Observer, base http.RoundTripper, urls map[string]string) (*agentCaller, error) {
	ctx = setupContext(ctx)
	a := &agentCaller{web: newHTTPCaller(base, urls, obs)}
	mws, err := otelbudgetmcp.ClientMiddleware(obs, nil, otelbudgetmcp.WithPropagators(propagation.TraceContext{}))
	if err != nil {
		return nil, err
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "tracedemo-agent", Version: "v1"}, nil)
	client.AddSendingMiddleware(mws...)
	transport := &mcp.StreamableClientTransport{
		Endpoint: urls["search"], HTTPClient: &http.Client{Transport: base},
		DisableStandaloneSSE: true, // the agent only calls; nothing to hear from the server
		MaxRetries:           -1,   // no reconnection behind the budget's back
	}
	if a.session, err = client.Connect(ctx, transport, nil); err != nil {
		return nil, fmt.Errorf("connecting to the search MCP server: %w", err)
	}
	for _, err := range a.session.Tools(ctx, nil) {
		if err != nil {
			return nil, errors.Join(fmt.Errorf("listing the search MCP server's tools: %w", err), a.close())
		}
	}
	a.llm = openai.NewClient(
		option.WithBaseURL(urls["extract"]+"/v1/"),
		option.WithAPIKey("tracedemo"),
		option.WithHTTPClient(&http.Client{Transport: sharedTransport(base, obs)}),
		option.WithMaxRetries(0),
	)
	return a, nil
}

// withPolicy sets p for the next call on whichever client makes it.
func (a *agentCaller) withPolicy(ctx context.Context, p deadline.Policy) context.Context {
	return deadlinemcp.WithRequestPolicy(deadlinehttp.WithRequestPolicy(ctx, p), p)
}

func (a *agentCaller) call(ctx context.Context, s step, key string) error {
	switch s.name {
	case "search":
		res, err := a.session.CallTool(ctx, &mcp.CallToolParams{Name: s.name, Arguments: map[string]any{"q": "deadline budget"}})
		if err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		if res.IsError {
			return fmt.Errorf("%s: the tool answered an error", s.name)
		}
		return nil
	case "extract":
		_, err := a.llm.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
			Model:    llmModel,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("extract the title and date: " + s.body)},
		}, option.WithHeader("Idempotency-Key", key)) // makes the POST safe to retry
		if err == nil {
			return nil
		}
		// The budget transport answers with the provider's last response
		// when it stops on one: the SDK makes it an *openai.Error, and
		// deadlinehttp.StopOf says why the transport stopped.
		if apiErr, ok := errors.AsType[*openai.Error](err); ok && apiErr.Response != nil {
			if stop, ok := deadlinehttp.StopOf(apiErr.Response); ok {
				return fmt.Errorf("%s: %w: %w", s.name, err, stop)
			}
		}
		return fmt.Errorf("%s: %w", s.name, err)
	}
	return a.web.call(ctx, s, key)
}

func (a *agentCaller) close() error {
	var err error
	if a.session != nil {
		err = a.session.Close()
	}
	return errors.Join(err, a.web.close())
}

// setupContext returns ctx under a parent span context that is not
// sampled, so that the spans of the MCP session's setup (initialize,
// server/discover, tools/list, on both sides: the trace context travels in
// _meta with its sampled flag unset) are dropped by a parent-based sampler,
// the SDK's default. Their metrics are still recorded.
func setupContext(ctx context.Context) context.Context {
	return trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{0x74, 0x72, 0x61, 0x63, 0x65, 0x64, 0x65, 0x6d, 0x6f}, // "tracedemo"
		SpanID:  trace.SpanID{0x73, 0x65, 0x74, 0x75, 0x70},                          // "setup"
	}))
}
