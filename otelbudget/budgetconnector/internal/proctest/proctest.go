// Package proctest measures a process the tests started, for the figures
// the extension's and the Collector's tests bound: its peak resident set,
// and the gzip bombs they send it.
package proctest

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// PeakRSS reads process pid's peak resident set (VmHWM) in bytes. Where
// there is no /proc (not Linux) it skips the test.
func PeakRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if os.IsNotExist(err) {
		t.Skip("no /proc here: the figure is Linux's VmHWM")
	}
	require.NoError(t, err)
	for line := range strings.Lines(string(b)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc/pid/status")
	return 0
}

// GzipZeros is n zero bytes, gzipped: about a thousandth of n. Gzip
// members one after another are one gzip stream.
func GzipZeros(t testing.TB, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	require.NoError(t, err)
	zeros := make([]byte, 64<<10)
	for ; n > 0; n -= len(zeros) {
		_, err := zw.Write(zeros[:min(n, len(zeros))])
		require.NoError(t, err)
	}
	require.NoError(t, zw.Close())
	return buf.Bytes()
}
