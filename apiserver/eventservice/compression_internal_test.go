package eventservice

import (
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// A message under the limit inflates whole, also after the decompressor is reused.
func TestBoundedGzipReadsMessagesUnderTheLimit(t *testing.T) {
	d := &boundedGzip{}
	for _, msg := range []string{"first message", strings.Repeat("x", DefaultReadMaxBytes)} {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write([]byte(msg))
		_ = zw.Close()
		if err := d.Reset(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(d)
		if err != nil || string(got) != msg {
			t.Fatalf("read %d bytes, %v; want the %d-byte message", len(got), err, len(msg))
		}
	}
}
