package raster

import (
	"image"
	"path/filepath"
	"testing"
)

func TestCropResizeAndPNGRoundTrip(t *testing.T) {
	m := New(4, 2)
	for i := range m.Pix {
		m.Pix[i] = uint8(i * 10)
	}
	c := m.Crop(image.Rect(1, 0, 3, 2))
	if c.W != 2 || c.H != 2 || c.Pix[0] != 30 || c.Pix[6] != 150 {
		t.Fatalf("crop = %+v", c)
	}
	if r := m.Resize(8, 4); r.W != 8 || r.H != 4 {
		t.Fatalf("resize = %dx%d", r.W, r.H)
	}
	if same := m.Resize(4, 2); string(same.Pix) != string(m.Pix) {
		t.Errorf("resizing to the same size changed pixels")
	}
	path := filepath.Join(t.TempDir(), "m.png")
	if err := m.SavePNG(path); err != nil {
		t.Fatal(err)
	}
	back, err := Load(path)
	if err != nil || string(back.Pix) != string(m.Pix) {
		t.Errorf("PNG round trip changed the image: %v", err)
	}
	if b := BoxOf(image.Rect(1, 2, 4, 6)); b != (Box{1, 2, 3, 4}) || b.Rect() != image.Rect(1, 2, 4, 6) {
		t.Errorf("box = %v", b)
	}
}
