package deadlinehttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/deadline/deadlinehttp"
)

// TestHandlerAdmissionComposes: several WithAdmission options all run, in
// the order given, once each per request; a nil one is skipped.
func TestHandlerAdmissionComposes(t *testing.T) {
	var got []string
	add := func(name string) deadlinehttp.HandlerOption {
		return deadlinehttp.WithAdmission(func(r *http.Request, a deadlinehttp.Admission) {
			got = append(got, name+" "+a.Limit.String())
		})
	}
	h, err := deadlinehttp.NewHandler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		got = append(got, "next")
	}), add("first"), deadlinehttp.WithAdmission(nil), add("second"), add("third"))
	require.NoError(t, err)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set(deadlinehttp.DefaultHeader, "500")
	h.ServeHTTP(httptest.NewRecorder(), r)
	assert.Equal(t, []string{"first header", "second header", "third header", "next"}, got)
}
