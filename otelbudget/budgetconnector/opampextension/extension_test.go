package opampextension

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/open-telemetry/opamp-go/protobufs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"google.golang.org/protobuf/proto"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/agenttest"
	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/opampextension/internal/metadatatest"
	"github.com/deadlinebudget/budget/otelbudget/fleetceilings"
)

func TestFactoryDefaults(t *testing.T) {
	f := NewFactory()
	assert.Equal(t, Type, f.Type().String())
	assert.Equal(t, Stability, f.Stability())
	cfg := f.CreateDefaultConfig().(*Config)
	require.NoError(t, componenttest.CheckConfigStruct(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "localhost:4320", cfg.ServerConfig.NetAddr.Endpoint, "loopback unless configured otherwise")
	assert.Equal(t, int64(DefaultMaxRequestBodySize), cfg.ServerConfig.MaxRequestBodySize)
}

// The usual server keys (tls, auth, max_request_body_size) are the
// Collector's own; every invalid field is reported, each with its key.
func TestConfigUnmarshalAndValidate(t *testing.T) {
	cfg := NewFactory().CreateDefaultConfig().(*Config)
	require.NoError(t, confmap.NewFromStringMap(map[string]any{
		"endpoint":              "0.0.0.0:4320",
		"tls":                   map[string]any{"cert_file": "cert.pem", "key_file": "key.pem"},
		"auth":                  map[string]any{"authenticator": "bearertokenauth/agents"},
		"max_request_body_size": 4096,
		"max_agents":            50,
		"send_timeout":          "2s",
	}).Unmarshal(cfg))
	require.NoError(t, confmap.Validate(cfg))
	assert.Equal(t, "0.0.0.0:4320", cfg.ServerConfig.NetAddr.Endpoint)
	assert.True(t, cfg.ServerConfig.TLS.HasValue())
	assert.Equal(t, "bearertokenauth/agents", cfg.ServerConfig.Auth.Get().Config.AuthenticatorID.String())
	assert.Equal(t, int64(4096), cfg.ServerConfig.MaxRequestBodySize)
	assert.Equal(t, 2*time.Second, cfg.SendTimeout)

	cfg.ServerConfig.NetAddr.Endpoint, cfg.Path, cfg.MaxAgents, cfg.SendTimeout = "nope", "v1", 0, 0
	err := confmap.Validate(cfg)
	require.ErrorIs(t, err, ErrInvalidConfig)
	for _, key := range []string{"endpoint", "path", "max_agents", "send_timeout"} {
		assert.Contains(t, err.Error(), key+":", "every error is reported with its key")
	}
}

// The extension serves each agent its service's ceilings: at once to one
// that connects after they were published, pushed over WebSocket when they
// change, at the next poll over plain HTTP; another service's agent gets
// none of them; an unchanged set is not sent again; an invalid one is not
// kept.
func TestServesCeilings(t *testing.T) {
	x := start(t, testConfig(), nil)
	addr := x.Addr().String()

	x.PublishCeilings(agenttest.Ceilings("checkout", 120))
	early := agenttest.Start(t, addr, DefaultPath, "checkout", agenttest.Options{})
	polling := agenttest.Start(t, addr, DefaultPath, "checkout", agenttest.Options{HTTP: true})
	other := agenttest.Start(t, addr, DefaultPath, "search", agenttest.Options{})
	for _, a := range []*agenttest.Agent{early, polling} {
		require.Eventually(t, func() bool { return len(a.Got()) == 1 }, 10*time.Second, 5*time.Millisecond)
		assert.Equal(t, 120.0, a.Got()[0].Steps["fetch"].CeilingMS)
		assert.Equal(t, "checkout", a.Got()[0].Service)
	}

	// The same ceilings computed again are not a change.
	x.PublishCeilings(agenttest.Ceilings("checkout", 120))
	x.PublishCeilings(agenttest.Ceilings("checkout", 150))
	for _, a := range []*agenttest.Agent{early, polling} {
		require.Eventually(t, func() bool { return len(a.Got()) == 2 }, 10*time.Second, 5*time.Millisecond)
		assert.Equal(t, 150.0, a.Got()[1].Steps["fetch"].CeilingMS)
	}
	// The agents reported them applied; nothing more is sent after that.
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		n := 0
		for _, s := range x.agents {
			if s.service == "checkout" && s.status == protobufs.RemoteConfigStatuses_RemoteConfigStatuses_APPLIED {
				n++
			}
		}
		return n == 2
	}, 10*time.Second, 5*time.Millisecond)
	x.PublishCeilings(agenttest.Ceilings("search", 80))
	require.Eventually(t, func() bool { return len(other.Got()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Len(t, early.Got(), 2)
	assert.Len(t, polling.Got(), 2)

	// An invalid set is refused before it is kept: no agent can be sent it.
	x.PublishCeilings(agenttest.Ceilings("payments", -1))
	x.mu.Lock()
	_, kept := x.services["payments"]
	x.mu.Unlock()
	assert.False(t, kept, "an invalid set is not kept for serving")
}

// With tls and auth (the contrib bearertokenauth extension), an agent
// with the token gets its service's ceilings over wss and https; a peer
// without it, or with another, is refused (401) before the OpAMP server
// sees it. What an authenticated agent may read: any service's ceilings,
// the service.name it states selects them (docs/fleet.md, "Security").
func TestTLSAndBearerAuth(t *testing.T) {
	cfg, h, certs := secured(t, "s3cret")
	x := start(t, cfg, h)
	addr := x.Addr().String()
	x.PublishCeilings(agenttest.Ceilings("checkout", 120))
	x.PublishCeilings(agenttest.Ceilings("payments", 300))

	auth := http.Header{"Authorization": {"Bearer s3cret"}}
	ws := agenttest.Start(t, addr, DefaultPath, "checkout", agenttest.Options{TLS: certs.ClientTLS(t), Header: auth})
	polling := agenttest.Start(t, addr, DefaultPath, "checkout", agenttest.Options{HTTP: true, TLS: certs.ClientTLS(t), Header: auth})
	other := agenttest.Start(t, addr, DefaultPath, "payments", agenttest.Options{TLS: certs.ClientTLS(t), Header: auth})
	for _, a := range []*agenttest.Agent{ws, polling} {
		require.Eventually(t, func() bool { return len(a.Got()) == 1 }, 10*time.Second, 5*time.Millisecond)
		assert.Equal(t, 120.0, a.Got()[0].Steps["fetch"].CeilingMS)
	}
	require.Eventually(t, func() bool { return len(other.Got()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, 300.0, other.Got()[0].Steps["fetch"].CeilingMS, "an authenticated agent reads the service it names")

	url := "wss://" + addr + DefaultPath
	for name, hdr := range map[string]http.Header{
		"anonymous":   nil,
		"wrong token": {"Authorization": {"Bearer guess"}},
		"no scheme":   {"Authorization": {"s3cret"}},
	} {
		d := websocket.Dialer{TLSClientConfig: certs.ClientTLS(t)}
		conn, resp, err := d.Dial(url, hdr)
		require.ErrorIs(t, err, websocket.ErrBadHandshake, name)
		require.Nil(t, conn)
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, name)
		_ = resp.Body.Close()
	}
	// Plain TLS-less HTTP to a TLS endpoint gets nothing either.
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+addr+DefaultPath, auth)
	require.Error(t, err)
	require.Nil(t, conn)
	x.mu.Lock()
	assert.Len(t, x.agents, 3, "only the authenticated agents are known")
	x.mu.Unlock()
}

// wsMessage is an OpAMP WebSocket message: a zero header, then the
// protobuf.
func wsMessage(t *testing.T, m *protobufs.AgentToServer) []byte {
	b, err := proto.Marshal(m)
	require.NoError(t, err)
	return append([]byte{0}, b...)
}

func describe(uid []byte, service string) *protobufs.AgentToServer {
	return &protobufs.AgentToServer{InstanceUid: uid, AgentDescription: &protobufs.AgentDescription{IdentifyingAttributes: []*protobufs.KeyValue{
		{Key: "service.name", Value: &protobufs.AnyValue{Value: &protobufs.AnyValue_StringValue{StringValue: service}}},
	}}}
}

// dialSlow opens a WebSocket whose receive buffer is 4 KiB: once it stops
// reading, the server's writes to it block after a few MiB at most.
func dialSlow(t *testing.T, addr string) *websocket.Conn {
	d := websocket.Dialer{ReadBufferSize: 4096, NetDialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, a)
		if err == nil {
			err = c.(*net.TCPConn).SetReadBuffer(4096)
		}
		return c, err
	}}
	conn, _, err := d.Dial("ws://"+addr+DefaultPath, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// bigCeilings is a valid set of learn.MaxSteps steps with long names: a
// body of about 90 KB.
func bigCeilings(service string, ms float64) fleetceilings.Ceilings {
	c := agenttest.Ceilings(service, ms)
	for i := range 255 {
		c.Steps[fmt.Sprintf("step-%03d-%s", i, strings.Repeat("x", 200))] = c.Steps["fetch"]
	}
	return c
}

// One WebSocket that registers 3 000 instance UIDs and then stops reading
// holds one agent slot; a real agent of the same service still gets every
// update while the silent socket's push is stuck; Shutdown returns within
// its context.
func TestAgentsBoundedOnOneSocket(t *testing.T) {
	cfg := testConfig()
	cfg.MaxAgents, cfg.SendTimeout = 100, time.Hour // the stuck push is never timed out here
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontestSettings(), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), host{}))
	x := ext.(*extensionImpl)
	addr := x.Addr().String()

	real := agenttest.Start(t, addr, DefaultPath, "checkout", agenttest.Options{})
	silent := dialSlow(t, addr)
	// It reads the answers while it registers, then stops reading.
	reading := make(chan struct{})
	go func() {
		defer close(reading)
		for {
			if _, _, err := silent.ReadMessage(); err != nil {
				return
			}
		}
	}()
	var last []byte
	for range 3000 {
		last = make([]byte, 16)
		_, _ = rand.Read(last)
		require.NoError(t, silent.WriteMessage(websocket.BinaryMessage, wsMessage(t, describe(last, "checkout"))))
	}
	// The server has read all 3 000: the last UID is the socket's agent.
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		a := x.agents[string(last)]
		return a != nil && a.ws != nil
	}, 10*time.Second, time.Millisecond)
	x.mu.Lock()
	n := len(x.agents)
	x.mu.Unlock()
	assert.Equal(t, 2, n, "3 000 UIDs on one socket hold one agent (the real one is the other)")
	require.NoError(t, silent.SetReadDeadline(time.Now()))
	<-reading

	// The silent socket's push gets stuck; the real agent gets each update.
	var sent time.Time
	for i := range 200 {
		sent = time.Now()
		x.PublishCeilings(bigCeilings("checkout", float64(100+i)))
	}
	require.Eventually(t, func() bool {
		g := real.Got()
		return len(g) > 0 && g[len(g)-1].Steps["fetch"].CeilingMS == 299
	}, 10*time.Second, time.Millisecond)
	t.Logf("the real agent had the last update %v after it was published, the silent socket's push stuck", time.Since(sent))
	x.mu.Lock()
	w := x.agents[string(last)].ws
	stuck := w.sending && w.pending != nil
	x.mu.Unlock()
	assert.True(t, stuck, "the silent socket's push is stuck, the real agent's went out")

	// One more update, with the silent socket stuck: how long it takes.
	sent = time.Now()
	x.PublishCeilings(agenttest.Ceilings("checkout", 500))
	require.Eventually(t, func() bool {
		g := real.Got()
		return g[len(g)-1].Steps["fetch"].CeilingMS == 500
	}, 10*time.Second, time.Millisecond)
	t.Logf("with the silent socket's push stuck, the real agent had an update %v after it was published", time.Since(sent))

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	began := time.Now()
	require.NoError(t, ext.Shutdown(ctx), "Shutdown returns within its context")
	t.Logf("Shutdown took %v with a stuck push", time.Since(began))
}

// An agent that cannot take a push is disconnected and counted as dropped,
// exactly once, whether the push timed out (send_timeout) or failed first.
func TestSlowAgentDropped(t *testing.T) {
	cfg := testConfig()
	cfg.SendTimeout = 50 * time.Millisecond
	x := start(t, cfg, nil)
	silent := dialSlow(t, x.Addr().String())
	require.NoError(t, silent.WriteMessage(websocket.BinaryMessage, wsMessage(t, describe([]byte("0123456789abcdef"), "checkout"))))
	i := 0
	require.Eventually(t, func() bool {
		i++
		x.PublishCeilings(bigCeilings("checkout", float64(i)))
		return x.dropped.Load() > 0
	}, 20*time.Second, time.Millisecond)
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.agents) == 0 && len(x.conns) == 0
	}, 10*time.Second, time.Millisecond, "the dropped agent is forgotten")
	// Counted once, whichever path disconnected it (the timer, or a write
	// that failed first), and nothing more is pushed to it.
	x.PublishCeilings(bigCeilings("checkout", float64(i+1)))
	assert.Equal(t, int64(1), x.dropped.Load())
}

// max_agents bounds the WebSocket connections too: one beyond it is
// refused (503), counted.
func TestMaxAgentsRefusesConnections(t *testing.T) {
	cfg := testConfig()
	cfg.MaxAgents = 2
	tt := componenttest.NewTelemetry()
	defer func() { require.NoError(t, tt.Shutdown(context.Background())) }()
	ext, err := NewFactory().Create(context.Background(), metadatatest.NewSettings(tt), cfg)
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), host{}))
	defer func() { require.NoError(t, ext.Shutdown(context.Background())) }()
	x := ext.(*extensionImpl)
	addr := x.Addr().String()
	for range 2 {
		c, _, err := websocket.DefaultDialer.Dial("ws://"+addr+DefaultPath, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
	}
	require.Eventually(t, func() bool {
		x.mu.Lock()
		defer x.mu.Unlock()
		return len(x.conns) == 2
	}, 10*time.Second, time.Millisecond)
	_, resp, err := websocket.DefaultDialer.Dial("ws://"+addr+DefaultPath, nil)
	require.ErrorIs(t, err, websocket.ErrBadHandshake)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	_ = resp.Body.Close()
	assert.Equal(t, int64(1), x.refused.Load())
	metadatatest.AssertEqualDeadlinebudgetOpampAgentsRefused(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
}

// A WebSocket message larger than max_request_body_size ends the
// connection instead of being buffered whole.
func TestWebSocketMessageBounded(t *testing.T) {
	cfg := testConfig()
	cfg.ServerConfig.MaxRequestBodySize = 64 << 10
	x := start(t, cfg, nil)
	c, _, err := websocket.DefaultDialer.Dial("ws://"+x.Addr().String()+DefaultPath, nil)
	require.NoError(t, err)
	defer c.Close()
	big := describe([]byte("0123456789abcdef"), strings.Repeat("s", 4<<20))
	err = c.WriteMessage(websocket.BinaryMessage, wsMessage(t, big))
	if err == nil {
		_, _, err = c.ReadMessage()
	}
	require.Error(t, err, "the server closed the connection")
	x.mu.Lock()
	defer x.mu.Unlock()
	assert.Empty(t, x.agents)
	assert.False(t, errors.Is(err, context.DeadlineExceeded))
}

// Plain-HTTP agents are bounded by max_agents too: a flood of new instance
// UIDs forgets plain-HTTP agents, never a WebSocket one, and the agents
// stay at max_agents.
func TestMaxAgentsOverPlainHTTP(t *testing.T) {
	cfg := testConfig()
	cfg.MaxAgents = 10
	x := start(t, cfg, nil)
	addr := x.Addr().String()
	x.PublishCeilings(agenttest.Ceilings("checkout", 120))
	ws := agenttest.Start(t, addr, DefaultPath, "checkout", agenttest.Options{})
	require.Eventually(t, func() bool { return len(ws.Got()) == 1 }, 10*time.Second, time.Millisecond)
	for i := range 100 {
		body, err := proto.Marshal(describe([]byte(fmt.Sprintf("uid-%012d", i)), "checkout"))
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+DefaultPath, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-protobuf")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	assert.Len(t, x.agents, 10)
	n := 0
	for _, a := range x.agents {
		if a.ws != nil {
			n++
		}
	}
	assert.Equal(t, 1, n, "the WebSocket agent is kept")
}

// Shutdown returns within its context even when a plain-HTTP agent is
// stuck sending its body: it gives up waiting when the context ends, says
// so, and closes the connection.
func TestShutdownWithinItsContext(t *testing.T) {
	f := NewFactory()
	ext, err := f.Create(context.Background(), extensiontestSettings(), testConfig())
	require.NoError(t, err)
	require.NoError(t, ext.Start(context.Background(), host{}))
	x := ext.(*extensionImpl)
	conn, err := net.Dial("tcp", x.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-protobuf\r\nContent-Length: 1000\r\n\r\n0123456789", DefaultPath)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return x.inHandler.Load() == 1 }, 10*time.Second, time.Millisecond,
		"the request is in the handler, reading its body")
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = ext.Shutdown(ctx)
	require.ErrorIs(t, err, context.DeadlineExceeded, "Shutdown gave up at its context's end")
}
