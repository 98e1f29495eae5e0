package eventservice

import (
	"compress/gzip"
	"errors"
	"io"

	"connectrpc.com/connect"
)

// errInflatedTooLarge ends the decompression of a message past DefaultReadMaxBytes.
var errInflatedTooLarge = errors.New("the decompressed message is larger than the limit")

// boundedGzip is connect's gzip with a ceiling: connect stops reading a message at the
// limit, then reads the rest to report its size, so a 200 KB gzip of zeros cost 200 MB of
// inflating before its refusal. This reader fails past the limit instead; the caller then
// gets ResourceExhausted without the size.
type boundedGzip struct {
	gz   gzip.Reader
	left int64
}

// readCeiling lets connect read one byte past the limit, as it does to tell the limit was
// passed.
const readCeiling = DefaultReadMaxBytes + 1

func (b *boundedGzip) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errInflatedTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.gz.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *boundedGzip) Reset(r io.Reader) error {
	b.left = readCeiling
	return b.gz.Reset(r)
}

func (b *boundedGzip) Close() error { return b.gz.Close() }

// boundedGzipOption replaces the handler's gzip with boundedGzip (compressing responses as
// connect's own gzip does).
func boundedGzipOption() connect.HandlerOption {
	return connect.WithCompression("gzip",
		func() connect.Decompressor { return &boundedGzip{left: readCeiling} },
		func() connect.Compressor { return gzip.NewWriter(io.Discard) })
}
