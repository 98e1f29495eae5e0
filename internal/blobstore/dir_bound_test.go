package blobstore

import (
	"context"
	"errors"
	"flag"
	"io"
	"sync"
	"testing"
)

// A tenant's inline faces (up to 16 MiB a request, kept while their tasks live) filled the
// apiserver's emptyDir past its sizeLimit, and the kubelet evicts such a pod: the REST API and
// the manager beside it down, every upload lost. A Dir with MaxBytes refuses the blob that would
// pass the bound instead, and takes blobs again once some are deleted.
func TestADirRefusesABlobThatWouldPassItsBound(t *testing.T) {
	ctx := context.Background()
	d := &Dir{Root: t.TempDir(), BaseURL: "http://blobs.example/", MaxBytes: 100}
	first := ContentName("a", "image/png", make([]byte, 60))
	if _, err := d.Put(ctx, first, "image/png", make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	second := ContentName("b", "image/png", make([]byte, 60))
	if _, err := d.Put(ctx, second, "image/png", make([]byte, 60)); !errors.Is(err, ErrFull) {
		t.Fatalf("60 bytes more in a Dir holding 60 of at most 100: err = %v, want ErrFull", err)
	}
	if _, err := d.Stat(ctx, second); !errors.Is(err, ErrNotFound) {
		t.Errorf("the refused blob was stored (Stat: %v)", err)
	}
	// The same name again (a retry of the request that stored it) holds no more bytes.
	if _, err := d.Put(ctx, first, "image/png", make([]byte, 60)); err != nil {
		t.Errorf("putting a stored blob again: %v", err)
	}
	if _, err := d.Put(ctx, ContentName("c", "image/png", make([]byte, 40)), "image/png", make([]byte, 40)); err != nil {
		t.Errorf("40 bytes in a Dir holding 60 of at most 100: %v", err)
	}
	if err := d.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Put(ctx, second, "image/png", make([]byte, 60)); err != nil {
		t.Errorf("60 bytes after 60 were deleted: %v", err)
	}
}

// Puts that race are counted one at a time: of ten 30-byte blobs at once, three fit in 100.
func TestRacingPutsDoNotPassTheBoundTogether(t *testing.T) {
	d := &Dir{Root: t.TempDir(), BaseURL: "http://blobs.example/", MaxBytes: 100}
	var wg sync.WaitGroup
	var mu sync.Mutex
	stored := 0
	for i := range 10 {
		wg.Go(func() {
			data := make([]byte, 30)
			if _, err := d.Put(context.Background(), ContentName(string(rune('a'+i)), "image/png", data), "image/png", data); err == nil {
				mu.Lock()
				stored++
				mu.Unlock()
			} else if !errors.Is(err, ErrFull) {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if held, err := d.bytesHeld(); err != nil || stored != 3 || held != 90 {
		t.Errorf("%d blobs stored, %d bytes held (%v); want 3 and 90", stored, held, err)
	}
}

func TestTheDirBoundFlagTakesKubernetesBinarySuffixes(t *testing.T) {
	for v, want := range map[string]int64{"0": 0, "1000": 1000, "64Ki": 64 << 10, "1536Mi": 1536 << 20, "2Gi": 2 << 30} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f.Bind(fs, "uploads", t.TempDir(), "p/")
		if err := fs.Parse([]string{"--blob-dir-max-bytes=" + v}); err != nil || f.DirMaxBytes != want {
			t.Errorf("%s: %d (%v), want %d", v, f.DirMaxBytes, err, want)
			continue
		}
		store, err := f.Open("http://blobs.example/")
		if d, ok := store.(*Dir); err != nil || !ok || d.MaxBytes != want {
			t.Errorf("%s: Open gave %#v (%v), want a Dir bound at %d", v, store, err, want)
		}
	}
	for _, v := range []string{"-1", "1.5Gi", "2G", "1e9", "Mi", "99999999999Gi", ""} {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Bind(fs, "uploads", t.TempDir(), "p/")
		if err := fs.Parse([]string{"--blob-dir-max-bytes=" + v}); err == nil {
			t.Errorf("%q: accepted as %d bytes", v, f.DirMaxBytes)
		}
	}
}
