package raster

import "image"

// Box is a rectangle as [x, y, w, h], the form face detectors print and analyze outputs carry.
type Box [4]int

// BoxOf converts a rectangle.
func BoxOf(r image.Rectangle) Box { return Box{r.Min.X, r.Min.Y, r.Dx(), r.Dy()} }

// Rect converts back.
func (b Box) Rect() image.Rectangle { return image.Rect(b[0], b[1], b[0]+b[2], b[1]+b[3]) }
