// Package imageinput turns a base64 image sent by a caller into checked bytes: a real JPEG, PNG
// or WebP within size and dimension limits. Dimensions are read from the header before the
// image is decoded, so a small file that would decode into gigabytes (a decompression bomb) is
// refused without being decoded.
package imageinput

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // registers the JPEG decoder
	_ "image/png"  // registers the PNG decoder
	"strings"

	_ "golang.org/x/image/webp" // registers the WebP decoder
)

// Limits bound what is accepted.
type Limits struct {
	// MaxBytes is the largest decoded file.
	MaxBytes int
	// MaxSide is the largest width or height in pixels.
	MaxSide int
	// MaxPixels is the largest width × height.
	MaxPixels int
}

// DefaultLimits suit face photos: 10 MiB, 8192 px per side, 40 megapixels.
var DefaultLimits = Limits{MaxBytes: 10 << 20, MaxSide: 8192, MaxPixels: 40_000_000}

// Image is a checked image.
type Image struct {
	Data          []byte
	ContentType   string
	Width, Height int
}

// ErrInvalid is wrapped by every refusal.
var ErrInvalid = errors.New("invalid image")

var contentTypes = map[string]string{"jpeg": "image/jpeg", "png": "image/png", "webp": "image/webp"}

// DecodeBase64 decodes s (plain base64, or a data: URL) and checks the image.
func DecodeBase64(s string, lim Limits) (*Image, error) {
	s = strings.TrimSpace(s)
	// A URL's scheme is case-insensitive (RFC 3986), and so are RFC 2397's ";base64" (ABNF
	// strings) and the media type: DATA:image/png;BASE64,… is a data URL too.
	if len(s) >= len("data:") && strings.EqualFold(s[:len("data:")], "data:") {
		meta, payload, found := strings.Cut(s[len("data:"):], ",")
		if !found || len(meta) < len(";base64") || !strings.EqualFold(meta[len(meta)-len(";base64"):], ";base64") {
			return nil, fmt.Errorf("%w: a data URL must look like data:image/png;base64,<data>", ErrInvalid)
		}
		s = payload
	}
	if s == "" {
		return nil, fmt.Errorf("%w: empty", ErrInvalid)
	}
	// Refuse before allocating: the encoded form of MaxBytes is at most 4/3 larger.
	if len(s) > base64.StdEncoding.EncodedLen(lim.MaxBytes)+len(s)/64+4 {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrInvalid, lim.MaxBytes)
	}
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == ' ' || r == '\t' {
			return -1
		}
		return r
	}, s)
	data, err := decodeAnyBase64(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not valid base64", ErrInvalid)
	}
	return Check(data, lim)
}

// decodeAnyBase64 decodes standard base64, padded or not, or its URL-safe alphabet (RFC 4648
// §5: '-' and '_' for '+' and '/', what Python's urlsafe_b64encode and JWT-minded clients
// send). The alphabets differ only in characters the other lacks, so no input is read two ways.
func decodeAnyBase64(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		var data []byte
		if data, err = enc.DecodeString(s); err == nil {
			return data, nil
		}
		if data, err = enc.WithPadding(base64.NoPadding).DecodeString(strings.TrimRight(s, "=")); err == nil {
			return data, nil
		}
	}
	return nil, err
}

// Check verifies that data is a JPEG, PNG or WebP image within lim.
func Check(data []byte, lim Limits) (*Image, error) {
	if len(data) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes is larger than %d", ErrInvalid, len(data), lim.MaxBytes)
	}
	cfg, format, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("%w: not a JPEG, PNG or WebP image", ErrInvalid)
	}
	ct, ok := contentTypes[format]
	if !ok {
		return nil, fmt.Errorf("%w: %s images are not accepted (JPEG, PNG or WebP)", ErrInvalid, format)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > lim.MaxSide || cfg.Height > lim.MaxSide ||
		int64(cfg.Width)*int64(cfg.Height) > int64(lim.MaxPixels) {
		return nil, fmt.Errorf("%w: %dx%d pixels exceeds the limit of %d per side and %d in total",
			ErrInvalid, cfg.Width, cfg.Height, lim.MaxSide, lim.MaxPixels)
	}
	// Decode fully: a valid header on a truncated or corrupt body must not pass.
	if _, _, err := image.Decode(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("%w: the %s data is corrupt: %v", ErrInvalid, format, err)
	}
	return &Image{Data: data, ContentType: ct, Width: cfg.Width, Height: cfg.Height}, nil
}
