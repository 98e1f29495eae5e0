// Package blobstore keeps media that callers upload inline (base64 faces) out of the custom
// resources: the bytes go to a store and tasks carry only a URL. Dir is the embedded default,
// a local directory served over HTTP by the apiserver.
package blobstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// Store saves a blob under name (from NewName or ContentName) and returns the URL it can be
// fetched from. A name is only ever given to the same bytes, so putting it again is harmless:
// Dir keeps the file it has, S3 overwrites the object with identical bytes. Either way the
// blob counts as put now, which List reports.
type Store interface {
	Put(ctx context.Context, name, contentType string, data []byte) (url string, err error)
	// Delete removes the blob name; one already gone is no error.
	Delete(ctx context.Context, name string) error
	// List calls fn with the name of every blob in the store and when it was last put.
	List(ctx context.Context, fn func(name string, put time.Time) error) error
	// Stat tells when the blob name was last put, or ErrNotFound if there is none.
	Stat(ctx context.Context, name string) (put time.Time, err error)
}

var extensions = map[string]string{"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "video/mp4": ".mp4"}

// NewName returns an unguessable object name with an extension for contentType.
func NewName(contentType string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + extensions[contentType]
}

// IsContentName reports whether name is one ContentName gives (NewName's are shorter).
func IsContentName(name string) bool { return contentName.MatchString(name) }

var contentName = regexp.MustCompile(`^[0-9a-f]{64}(\.[a-z0-9]{2,5})?$`)

// NameIn returns the ContentName that url (from Put) ends with, or "" if it ends with none.
// Dir's URLs, S3's presigned and public ones all end their path with the name.
func NameIn(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return contentNameSuffix.FindString(u.Path)
}

var contentNameSuffix = regexp.MustCompile(`[0-9a-f]{64}(\.[a-z0-9]{2,5})?$`)

// ContentName names data by a SHA-256 of scope and the bytes, with an extension for
// contentType: retries of one request (one scope) store one object, however many race, and
// the bytes alone do not tell another scope's name.
func ContentName(scope, contentType string, data []byte) string {
	h := sha256.New()
	h.Write([]byte(scope))
	h.Write([]byte{0})
	h.Write(data)
	return hex.EncodeToString(h.Sum(nil)) + extensions[contentType]
}

// Dir stores blobs as files in Root and names them under BaseURL (e.g.
// "http://videogen-apiserver.videogen-system.svc/v1/blobs/"), which Handler serves.
type Dir struct {
	Root    string
	BaseURL string
	// MaxBytes bounds what the directory holds (0: no bound): a Put that would take it past
	// MaxBytes fails with ErrFull. In a pod the directory is an emptyDir, and the kubelet evicts
	// a pod whose emptyDir passes its sizeLimit, every blob with it (and the apiserver's
	// manager beside it): an upload refused keeps the rest serving.
	MaxBytes int64

	mu sync.Mutex // a Put's count and write, one at a time, when MaxBytes is set
}

// ErrFull: a Dir holds MaxBytes, or a Put of these bytes would take it past that.
var ErrFull = errors.New("blob store: full")

// Put implements Store.
func (d *Dir) Put(_ context.Context, name, _ string, data []byte) (string, error) {
	if !validName.MatchString(name) {
		return "", fmt.Errorf("blob store: invalid name %q", name)
	}
	link := strings.TrimSuffix(d.BaseURL, "/") + "/" + name
	path := filepath.Join(d.Root, name)
	// The same name holds the same bytes, complete (renamed in): keep the file, and count it
	// as put now (List), as S3's overwrite does.
	now := time.Now()
	switch err := os.Chtimes(path, now, now); {
	case err == nil:
		return link, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("blob store: %w", err)
	}
	if err := os.MkdirAll(d.Root, 0o755); err != nil {
		return "", fmt.Errorf("blob store: %w", err)
	}
	if d.MaxBytes > 0 {
		// Counted from the directory each time, not kept: nothing to drift from what is on disk
		// (files a sweep removed, a restart). One Put at a time, so that two cannot both fit.
		d.mu.Lock()
		defer d.mu.Unlock()
		held, err := d.bytesHeld()
		if err != nil {
			return "", fmt.Errorf("blob store: %w", err)
		}
		if held+int64(len(data)) > d.MaxBytes {
			return "", fmt.Errorf("%w: it holds %d bytes of at most %d, and this blob is %d", ErrFull, held, d.MaxBytes, len(data))
		}
	}
	tmp, err := os.CreateTemp(d.Root, ".upload-*")
	if err != nil {
		return "", fmt.Errorf("blob store: %w", err)
	}
	// Write to a temp file and rename, so a reader never sees half a blob.
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return "", fmt.Errorf("blob store: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("blob store: %w", err)
	}
	// Two racing Puts of one name rename identical files over each other: either wins.
	if err := os.Rename(tmp.Name(), path); err != nil {
		os.Remove(tmp.Name())
		return "", fmt.Errorf("blob store: %w", err)
	}
	return link, nil
}

// bytesHeld is the size of every file in Root, uploads being written included.
func (d *Dir) bytesHeld() (int64, error) {
	entries, err := os.ReadDir(d.Root)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range entries {
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed since it was listed
		}
		if err != nil {
			return 0, err
		}
		if info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n, nil
}

// Delete implements Store.
func (d *Dir) Delete(_ context.Context, name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("blob store: invalid name %q", name)
	}
	if err := os.Remove(filepath.Join(d.Root, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("blob store: %w", err)
	}
	return nil
}

// Stat implements Store: the put time is the file's modification time.
func (d *Dir) Stat(_ context.Context, name string) (time.Time, error) {
	if !validName.MatchString(name) {
		return time.Time{}, fmt.Errorf("blob store: invalid name %q", name)
	}
	info, err := os.Stat(filepath.Join(d.Root, name))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return time.Time{}, fmt.Errorf("blob store: %s: %w", name, ErrNotFound)
	case err != nil:
		return time.Time{}, fmt.Errorf("blob store: %w", err)
	}
	return info.ModTime(), nil
}

// List implements Store: the put time is the file's modification time. Files that are no
// blob (an upload being written) are skipped.
func (d *Dir) List(_ context.Context, fn func(name string, put time.Time) error) error {
	entries, err := os.ReadDir(d.Root)
	if err != nil {
		return fmt.Errorf("blob store: %w", err)
	}
	for _, e := range entries {
		if !validName.MatchString(e.Name()) {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) { // deleted meanwhile
			continue
		}
		if err != nil {
			return fmt.Errorf("blob store: %w", err)
		}
		if err := fn(e.Name(), info.ModTime()); err != nil {
			return err
		}
	}
	return nil
}

// validName matches NewName's random names and ContentName's SHA-256 ones.
var validName = regexp.MustCompile(`^([0-9a-f]{32}|[0-9a-f]{64})(\.[a-z0-9]{2,5})?$`)

// ErrNotFound: no blob of that name.
var ErrNotFound = errors.New("blob not found")

// Handler serves GET {prefix}{name}; names are unguessable, so knowing one is the permission.
// Errors are in the API's envelope ({"error":{"code","message","request_id"}}).
func (d *Dir) Handler(prefix string) http.Handler {
	serve := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, prefix)
		notFound := func() {
			httpjson.WriteError(w, r, http.StatusNotFound, httpjson.CodeNotFound, "no blob "+httpjson.Echo(name))
		}
		if !validName.MatchString(name) {
			notFound()
			return
		}
		f, err := os.Open(filepath.Join(d.Root, name))
		if errors.Is(err, fs.ErrNotExist) {
			notFound()
			return
		}
		var info fs.FileInfo
		if err == nil {
			defer f.Close()
			info, err = f.Stat()
		}
		if err != nil {
			httpjson.WriteError(w, r, http.StatusInternalServerError, httpjson.CodeInternal, "the blob cannot be read")
			return
		}
		w.Header().Set("Cache-Control", "private, max-age=86400, immutable")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeContent(&envelopeErrors{ResponseWriter: w, r: r}, r, name, info.ModTime(), f)
	})
	return httpjson.WithRequestID(serve) // its own id when served alone (the worker)
}

// envelopeErrors gives the answers http.ServeContent writes on its own for a request's headers
// (a text/plain 416 for a Range it cannot satisfy, an empty 412 for a failed If-Match or
// If-Unmodified-Since) the error envelope, and keeps them from being cached. 2xx and 3xx pass.
type envelopeErrors struct {
	http.ResponseWriter
	r        *http.Request
	replaced bool
}

func (w *envelopeErrors) WriteHeader(status int) {
	if w.replaced {
		return
	}
	if status < http.StatusBadRequest {
		w.ResponseWriter.WriteHeader(status)
		return
	}
	w.replaced = true
	h := w.Header()
	h.Del("Cache-Control")
	h.Del("Content-Length")
	message := http.StatusText(status)
	switch status {
	case http.StatusRequestedRangeNotSatisfiable:
		message = "the Range header names no satisfiable range of this blob (" + h.Get("Content-Range") + ")"
	case http.StatusPreconditionFailed:
		message = "a precondition of the request (If-Match, If-Unmodified-Since) failed"
	}
	httpjson.WriteError(w.ResponseWriter, w.r, status, httpjson.CodeInvalidRequest, message)
}

func (w *envelopeErrors) Write(b []byte) (int, error) {
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps ServeContent's copy on the connection's sendfile path.
func (w *envelopeErrors) ReadFrom(src io.Reader) (int64, error) {
	if w.replaced {
		return io.Copy(io.Discard, src)
	}
	return io.Copy(w.ResponseWriter, src)
}

// Unwrap is for http.ResponseController.
func (w *envelopeErrors) Unwrap() http.ResponseWriter { return w.ResponseWriter }
