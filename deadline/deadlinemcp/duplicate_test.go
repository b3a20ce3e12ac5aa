package deadlinemcp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/admission"
	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
)

// proxy is a client-side RoundTripper that rewrites the body of every
// tools/call POST, as a proxy on the way could.
type proxy struct {
	old, new string
}

func (p proxy) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		if bytes.Contains(body, []byte(`"method":"tools/call"`)) {
			body = bytes.Replace(body, []byte(p.old), []byte(p.new), 1)
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
	}
	return http.DefaultTransport.RoundTrip(r)
}

// A request whose _meta holds the budget key more than once, as a proxy
// that adds a value makes it, is admitted with the smallest valid value,
// the rule deadlinehttp applies to a repeated Deadline-Budget-Ms header:
// a proxy can lower a budget, never raise it. encoding/json, and the SDK,
// keep the last value of a repeated key; Server.HTTPHandler makes the
// smallest the one they keep.
func TestDuplicateMetaKeySmallestWins(t *testing.T) {
	const key = `"` + deadlinemcp.MetaKey + `":`
	cases := []struct {
		name     string
		old, new string
		want     time.Duration
	}{
		{"50 then 999999", key + "50", key + "50," + key + "999999", 50 * time.Millisecond},
		{"999999 then 50", key + "50", key + "999999," + key + "50", 50 * time.Millisecond},
		{"50 then malformed", key + "50", key + `50,` + key + `"1"`, 50 * time.Millisecond},
		{"escaped duplicate", key + "50", key + `50,"io.github.deadlinebudget\/budget-\u006ds":999999`, 50 * time.Millisecond},
		{"a later _meta without the key", `"name":"search"`, `"name":"search","_meta":{"com.example/x":1}`, 50 * time.Millisecond},
		{"a later _meta with a larger one", `"name":"search"`, `"name":"search","_meta":{` + key + `999999}`, 50 * time.Millisecond},
		{"once: untouched", key + "50", key + "70", 70 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := &admissions{}
			srv := newBudgetServer(t, rec)
			search := &tool{name: "search"}
			s := newServer(t, srv, search)
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
			ts := httptest.NewServer(srv.HTTPHandler(h))
			defer ts.Close()
			transport := &mcp.StreamableClientTransport{Endpoint: ts.URL, HTTPClient: &http.Client{Transport: proxy{tc.old, tc.new}}, DisableStandaloneSSE: true, MaxRetries: -1}
			cs, err := mcp.NewClient(impl, nil).Connect(context.Background(), transport, nil)
			require.NoError(t, err)
			defer cs.Close()

			_, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "search", Meta: mcp.Meta{deadlinemcp.MetaKey: 50}})
			require.NoError(t, err)
			require.Len(t, rec.list(), 1)
			a := rec.list()[0]
			assert.Equal(t, tc.want, a.Budget)
			assert.Equal(t, admission.ByInbound, a.Limit)
			require.Len(t, search.arrivals(), 1)
		})
	}
}
