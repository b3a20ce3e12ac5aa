package opampextension

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/deadlinebudget/budget/otelbudget/budgetconnector/internal/proctest"
)

// helperEnv makes the test binary run TestHelperProcess as an extension
// alone, for a figure of its memory.
const helperEnv = "OPAMPEXT_HELPER_PROCESS"

// TestHelperProcess is not a test: run with helperEnv set, it starts the
// extension with its default configuration on 127.0.0.1, prints its
// address and serves until its standard input closes.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) != "1" {
		t.Skip("a helper process for TestGzipBodyBounded")
	}
	x := start(t, testConfig(), nil)
	fmt.Printf("addr %s\n", x.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// One 255 KiB gzip POST raises the extension's peak RSS by at most 64 MiB:
// the Collector's decompressor stops at max_request_body_size (1 MiB by
// default) instead of inflating ~260 MB. Measured in a process of its own.
func TestGzipBodyBounded(t *testing.T) {
	if os.Getenv(helperEnv) == "1" {
		t.Skip("in the helper process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	defer func() {
		_ = stdin.Close()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(stdout)
	var addr string
	for sc.Scan() {
		if a, ok := strings.CutPrefix(sc.Text(), "addr "); ok {
			addr = a
			break
		}
	}
	require.NotEmpty(t, addr, "the helper printed its address")
	go func() { _, _ = io.Copy(io.Discard, stdout) }()

	post := func(body []byte) int {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, "http://"+addr+DefaultPath, bytes.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "gzip")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	// Warm the server up with a small body, then measure the large one.
	assert.Equal(t, http.StatusBadRequest, post(proctest.GzipZeros(t, 2<<20)))
	before := proctest.PeakRSS(t, cmd.Process.Pid)
	// Gzip members one after another are one gzip stream: a MiB of zeros
	// a member, as many as fit in 255 KiB.
	member := proctest.GzipZeros(t, 1<<20)
	bomb := bytes.Repeat(member, (255<<10)/len(member))
	assert.Equal(t, http.StatusBadRequest, post(bomb), "the inflated body exceeds max_request_body_size")
	after := proctest.PeakRSS(t, cmd.Process.Pid)
	delta := after - before
	t.Logf("a %d-byte gzip POST (%d MiB inflated): peak RSS %d MiB -> %d MiB (+%.1f MiB)", len(bomb), len(bomb)/len(member), before>>20, after>>20, float64(delta)/(1<<20))
	assert.LessOrEqual(t, delta, int64(64<<20))
}
