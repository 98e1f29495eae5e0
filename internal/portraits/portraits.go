// Package portraits ships two public-domain portraits (see NOTICE): the person of the demo
// face-swap template and a different face to put into it, so the demo's result visibly shows a
// replaced face. The local stack renders its demo media from them, the worker's tests detect
// and swap faces on them, and Dockerfile.worker copies them for the kind demo.
package portraits

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

var (
	//go:embed grace-hopper.jpg
	templatePerson []byte
	//go:embed eileen-collins.jpg
	otherPerson []byte
)

// File names, as in this directory and in the worker image (/usr/share/videogen/portraits).
const (
	// TemplatePerson is Grace Hopper: the person in the demo template.
	TemplatePerson = "grace-hopper.jpg"
	// OtherPerson is Eileen Collins: the face the demo puts into the template.
	OtherPerson = "eileen-collins.jpg"
)

// WriteTo writes both portraits into dir (created if missing) and returns the paths of
// TemplatePerson and OtherPerson there, for tools such as ffmpeg that read files.
func WriteTo(dir string) (template, other string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	template, other = filepath.Join(dir, TemplatePerson), filepath.Join(dir, OtherPerson)
	for path, data := range map[string][]byte{template: templatePerson, other: otherPerson} {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return "", "", fmt.Errorf("writing portrait %s: %w", path, err)
		}
	}
	return template, other, nil
}
