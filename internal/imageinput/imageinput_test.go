package imageinput

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"strings"
	"testing"
)

func encode(t testing.TB, w, h int, enc func(*bytes.Buffer, image.Image) error) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		img.Set(x, x%h, color.RGBA{R: 200, A: 255})
	}
	var buf bytes.Buffer
	if err := enc(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func pngOf(t testing.TB, w, h int) []byte {
	return encode(t, w, h, func(b *bytes.Buffer, i image.Image) error { return png.Encode(b, i) })
}

func TestDecodeBase64AcceptsRealImages(t *testing.T) {
	jpg := encode(t, 64, 48, func(b *bytes.Buffer, i image.Image) error { return jpeg.Encode(b, i, nil) })
	cases := map[string]struct {
		in, ct string
	}{
		"png":           {base64.StdEncoding.EncodeToString(pngOf(t, 32, 16)), "image/png"},
		"jpeg data URL": {"data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(jpg), "image/jpeg"},
		// Schemes, RFC 2397's ";base64" and media types are case-insensitive.
		"upper-case data URL": {"DATA:IMAGE/JPEG;BASE64," + base64.StdEncoding.EncodeToString(jpg), "image/jpeg"},
		"unpadded":            {base64.RawStdEncoding.EncodeToString(pngOf(t, 5, 7)), "image/png"},
		"with newlines":       {wrap(base64.StdEncoding.EncodeToString(pngOf(t, 40, 40))), "image/png"},
		// RFC 4648's URL-safe alphabet, as Python's urlsafe_b64encode writes it.
		"url-safe":          {base64.URLEncoding.EncodeToString(jpg), "image/jpeg"},
		"url-safe unpadded": {base64.RawURLEncoding.EncodeToString(jpg), "image/jpeg"},
	}
	if base64.URLEncoding.EncodeToString(jpg) == base64.StdEncoding.EncodeToString(jpg) {
		t.Fatal("the test JPEG's base64 has no '+' or '/': the url-safe cases test nothing")
	}
	for name, c := range cases {
		img, err := DecodeBase64(c.in, DefaultLimits)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if img.ContentType != c.ct {
			t.Errorf("%s: content type %q, want %q", name, img.ContentType, c.ct)
		}
	}
}

// testdata/face.webp is a 16×16 red lossless WebP (VP8L) written by hand: the standard library
// cannot encode WebP, and callers do send it.
func TestDecodeBase64AcceptsWebP(t *testing.T) {
	raw, err := os.ReadFile("testdata/face.webp")
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string]string{
		"plain":    base64.StdEncoding.EncodeToString(raw),
		"data URL": "data:image/webp;base64," + base64.StdEncoding.EncodeToString(raw),
	} {
		img, err := DecodeBase64(in, DefaultLimits)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if img.ContentType != "image/webp" || img.Width != 16 || img.Height != 16 || !bytes.Equal(img.Data, raw) {
			t.Errorf("%s: got %s %dx%d (%d bytes), want image/webp 16x16 (%d bytes)", name, img.ContentType, img.Width, img.Height, len(img.Data), len(raw))
		}
	}
	decoded, _, err := image.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	if r, g, b, a := decoded.At(7, 7).RGBA(); r != 0xffff || g != 0 || b != 0 || a != 0xffff {
		t.Errorf("pixel (7,7) = %d,%d,%d,%d, want opaque red", r, g, b, a)
	}
}

func wrap(s string) string {
	var out []byte
	for i := 0; i < len(s); i += 60 {
		out = append(out, s[i:min(i+60, len(s))]...)
		out = append(out, '\n')
	}
	return string(out)
}

func TestDecodeBase64Refuses(t *testing.T) {
	var gifBuf bytes.Buffer
	_ = gif.Encode(&gifBuf, image.NewPaletted(image.Rect(0, 0, 4, 4), []color.Color{color.Black}), nil)
	valid := pngOf(t, 20, 20)
	cases := map[string]string{
		"empty":            "",
		"not base64":       "!!!not-base64!!!",
		"text":             base64.StdEncoding.EncodeToString([]byte("hello, I am not an image")),
		"gif":              base64.StdEncoding.EncodeToString(gifBuf.Bytes()),
		"truncated png":    base64.StdEncoding.EncodeToString(valid[:len(valid)/2]),
		"bad data URL":     "data:image/png,notbase64",
		"too many pixels":  base64.StdEncoding.EncodeToString(pngOf(t, 300, 300)),
		"too large a side": base64.StdEncoding.EncodeToString(pngOf(t, 120, 2)),
		// Both alphabets in one string is neither encoding.
		"mixed alphabets": "iVBORw0K+Ggo-AAAA",
	}
	lim := Limits{MaxBytes: 1 << 20, MaxSide: 100, MaxPixels: 50_000}
	for name, in := range cases {
		if _, err := DecodeBase64(in, lim); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		}
	}
	big := base64.StdEncoding.EncodeToString(make([]byte, 3000))
	if _, err := DecodeBase64(big, Limits{MaxBytes: 1000, MaxSide: 10, MaxPixels: 10}); !errors.Is(err, ErrInvalid) {
		t.Errorf("oversized input: %v", err)
	}
}

// A PNG header claiming 100000×100000 pixels in a few bytes must be refused from the header.
func TestDecompressionBombRefusedBeforeDecoding(t *testing.T) {
	bomb := pngOf(t, 1, 1)
	// IHDR width and height live at bytes 16..24; rewrite them and fix the chunk's CRC, so
	// the header is valid and only the dimension limit can refuse it.
	binary.BigEndian.PutUint32(bomb[16:20], 100000)
	binary.BigEndian.PutUint32(bomb[20:24], 100000)
	binary.BigEndian.PutUint32(bomb[29:33], crc32.ChecksumIEEE(bomb[12:29]))
	_, err := Check(bomb, DefaultLimits)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "exceeds the limit") {
		t.Fatalf("bomb: %v, want refused for its dimensions", err)
	}
}

func FuzzDecodeBase64(f *testing.F) {
	f.Add(base64.StdEncoding.EncodeToString(pngOf(f, 3, 3)))
	f.Add(base64.StdEncoding.EncodeToString(pngOf(f, 300, 20))) // over the fuzz limits: reaches the size check
	f.Add("data:image/png;base64,AAAA")
	f.Add("")
	f.Fuzz(func(t *testing.T, s string) {
		img, err := DecodeBase64(s, Limits{MaxBytes: 1 << 16, MaxSide: 256, MaxPixels: 1 << 14})
		if err == nil && (img.Width > 256 || img.Height > 256 || len(img.Data) > 1<<16) {
			t.Fatalf("accepted an image beyond the limits: %dx%d, %d bytes", img.Width, img.Height, len(img.Data))
		}
	})
}
