package deadlinemcpgo_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/deadlinemcpgo"
)

// Every kind of hostile _meta value, posted raw to mcp-go's streamable
// HTTP and SSE servers behind Server.HTTPHandler: a repeated key gives its
// smallest valid value.
func TestHTTPHandlerInboundMeta(t *testing.T) {
	for _, tc := range mcpbudgettestCases() {
		t.Run(tc.Name, func(t *testing.T) {
			rec := &admissions{}
			search := &tool{name: "search"}
			srv := newBudgetServer(t, rec, deadlinemcpgo.WithMaxBudget(mcpbudgettestMax))
			s := newServer(t, srv, search)
			ts := httptest.NewServer(srv.HTTPHandler(server.NewStreamableHTTPServer(s, server.WithStateLess(true))))
			defer ts.Close()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + tc.Members + `},"name":"search"}}`
			req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Len(t, rec.list(), 1, "%s", out)
			a := rec.list()[0]
			want := tc.Want
			assert.Equal(t, want.Budget, a.Budget)
			assert.Equal(t, want.Limit, a.Limit)
			assert.Equal(t, want.Refusal, a.Refusal)
			assert.Equal(t, want.Malformed, a.Malformed)
			if a.Refused() {
				assert.Contains(t, string(out), `"code":-32001`)
			} else {
				assert.Contains(t, string(out), `"result"`)
			}
		})
	}
}

func TestHTTPHandlerNil(t *testing.T) {
	s, err := deadlinemcpgo.NewServer()
	require.NoError(t, err)
	assert.Panics(t, func() { s.HTTPHandler(nil) })
}
