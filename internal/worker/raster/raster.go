// Package raster is the worker's in-memory picture: 8-bit RGB pixels, the format ffmpeg pipes
// as rgb24, with the few operations compositing needs (decode, crop, resize, PNG out).
package raster

import (
	"fmt"
	"image"
	"image/color"
	_ "image/jpeg" // registers the JPEG decoder
	"image/png"
	"io"
	"os"

	_ "golang.org/x/image/webp" // registers the WebP decoder
)

// Image is W×H RGB pixels, row by row, three bytes each.
type Image struct {
	W, H int
	Pix  []byte
}

// New returns a black w×h image.
func New(w, h int) *Image { return &Image{W: w, H: h, Pix: make([]byte, w*h*3)} }

// Bounds is the image's rectangle, for image.Rectangle arithmetic.
func (m *Image) Bounds() image.Rectangle { return image.Rect(0, 0, m.W, m.H) }

// At returns the pixel at x, y.
func (m *Image) At(x, y int) (r, g, b uint8) {
	i := (y*m.W + x) * 3
	return m.Pix[i], m.Pix[i+1], m.Pix[i+2]
}

// FromImage converts any image.Image.
func FromImage(src image.Image) *Image {
	b := src.Bounds()
	m := New(b.Dx(), b.Dy())
	for y := 0; y < m.H; y++ {
		for x := 0; x < m.W; x++ {
			c := color.NRGBAModel.Convert(src.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
			i := (y*m.W + x) * 3
			m.Pix[i], m.Pix[i+1], m.Pix[i+2] = c.R, c.G, c.B
		}
	}
	return m
}

// Load decodes a JPEG, PNG or WebP file.
func Load(path string) (*Image, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("not a JPEG, PNG or WebP image: %w", err)
	}
	return FromImage(img), nil
}

// NRGBA converts to an opaque image.NRGBA.
func (m *Image) NRGBA() *image.NRGBA {
	out := image.NewNRGBA(m.Bounds())
	for i, j := 0, 0; i < len(m.Pix); i, j = i+3, j+4 {
		out.Pix[j], out.Pix[j+1], out.Pix[j+2], out.Pix[j+3] = m.Pix[i], m.Pix[i+1], m.Pix[i+2], 255
	}
	return out
}

// WritePNG encodes the image as PNG.
func (m *Image) WritePNG(w io.Writer) error { return png.Encode(w, m.NRGBA()) }

// SavePNG writes the image to a PNG file.
func (m *Image) SavePNG(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := m.WritePNG(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Crop copies the part of m inside r (clipped to m).
func (m *Image) Crop(r image.Rectangle) *Image {
	r = r.Intersect(m.Bounds())
	out := New(r.Dx(), r.Dy())
	for y := 0; y < out.H; y++ {
		src := ((r.Min.Y+y)*m.W + r.Min.X) * 3
		copy(out.Pix[y*out.W*3:(y+1)*out.W*3], m.Pix[src:src+out.W*3])
	}
	return out
}

// Resize scales m to w×h with bilinear interpolation.
func (m *Image) Resize(w, h int) *Image {
	out := New(w, h)
	if m.W == 0 || m.H == 0 {
		return out
	}
	sx, sy := float64(m.W)/float64(w), float64(m.H)/float64(h)
	for y := 0; y < h; y++ {
		fy := max((float64(y)+0.5)*sy-0.5, 0)
		y0 := min(int(fy), m.H-1)
		y1 := min(y0+1, m.H-1)
		wy := fy - float64(y0)
		for x := 0; x < w; x++ {
			fx := max((float64(x)+0.5)*sx-0.5, 0)
			x0 := min(int(fx), m.W-1)
			x1 := min(x0+1, m.W-1)
			wx := fx - float64(x0)
			for c := 0; c < 3; c++ {
				top := float64(m.Pix[(y0*m.W+x0)*3+c])*(1-wx) + float64(m.Pix[(y0*m.W+x1)*3+c])*wx
				bot := float64(m.Pix[(y1*m.W+x0)*3+c])*(1-wx) + float64(m.Pix[(y1*m.W+x1)*3+c])*wx
				out.Pix[(y*w+x)*3+c] = uint8(top*(1-wy) + bot*wy + 0.5)
			}
		}
	}
	return out
}

// Luma returns the Rec. 601 luminance of every pixel, row by row.
func (m *Image) Luma() []float64 {
	out := make([]float64, m.W*m.H)
	for i := range out {
		p := m.Pix[i*3:]
		out[i] = 0.299*float64(p[0]) + 0.587*float64(p[1]) + 0.114*float64(p[2])
	}
	return out
}
