package deadlinemcp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/deadlinemcp"
	"github.com/deadlinebudget/budget/deadline/mcpbudget/mcpbudgettest"
)

// Every kind of hostile _meta value of the table both SDKs' servers are
// tested with (mcpbudgettest), posted raw to a stateless go-sdk server
// behind Server.HTTPHandler: a repeated key gives its smallest value.
func TestServerMetaCases(t *testing.T) {
	for _, tc := range mcpbudgettest.MetaCases() {
		t.Run(tc.Name, func(t *testing.T) {
			rec := &admissions{}
			srv := newBudgetServer(t, rec, deadlinemcp.WithMaxBudget(mcpbudgettest.Max))
			search := &tool{name: "search"}
			s := newServer(t, srv, search)
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true, JSONResponse: true})
			ts := httptest.NewServer(srv.HTTPHandler(h))
			defer ts.Close()
			body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"_meta":{` + tc.Members + `},"name":"search","arguments":{}}}`
			req, err := http.NewRequest(http.MethodPost, ts.URL, strings.NewReader(body))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := ts.Client().Do(req)
			require.NoError(t, err)
			out, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Len(t, rec.list(), 1, "%s", out)
			a := rec.list()[0]
			got := mcpbudgettest.Outcome{Present: a.Inbound.Present, Malformed: a.Malformed, Budget: a.Budget, Limit: a.Limit, Refusal: a.Refusal}
			assert.Equal(t, tc.Want, got)
			if a.Refused() {
				assert.Contains(t, string(out), `-32001`)
				assert.Empty(t, search.arrivals())
			} else {
				assert.Len(t, search.arrivals(), 1, "%s", out)
			}
		})
	}
}
