package blobstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/videogen-dev/videogen-operator/internal/versity"
)

// startVersity runs a real S3-compatible server for the test's lifetime.
func startVersity(t *testing.T) (endpoint, access, secret string) {
	s := versity.Start(t)
	return s.Endpoint, s.AccessKey, s.SecretKey
}

func TestS3StoresAndPresigns(t *testing.T) {
	endpoint, access, secret := startVersity(t)
	s, err := NewS3(S3Config{Endpoint: endpoint, Insecure: true, Region: "us-east-1", Bucket: "uploads",
		AccessKey: access, SecretKey: secret, Prefix: "faces/", PresignTTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Client().MakeBucket(ctx, "uploads", minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	payload := []byte("\x89PNG not really, but bytes all the same")
	u, err := s.Put(ctx, NewName("image/png"), "image/png", payload)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(u, "/uploads/faces/") || !strings.Contains(u, ".png") || !strings.Contains(u, "X-Amz-Signature=") {
		t.Fatalf("url = %s", u)
	}
	// The presigned URL is readable without credentials, as a generation backend reads it.
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, payload) {
		t.Fatalf("GET presigned = %d %q", resp.StatusCode, got)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "image/png" {
		t.Errorf("content type = %q", ct)
	}
	// A retry puts the same name again: harmless, the object is the same bytes.
	name := ContentName("vt-task", "image/png", payload)
	for range 2 {
		if _, err := s.Put(ctx, name, "image/png", payload); err != nil {
			t.Fatalf("Put of an existing name: %v", err)
		}
	}
	listed := 0
	for obj := range s.Client().ListObjects(ctx, "uploads", minio.ListObjectsOptions{Prefix: "faces/" + name}) {
		if obj.Err != nil {
			t.Fatal(obj.Err)
		}
		listed++
	}
	if listed != 1 {
		t.Fatalf("%d objects named %s, want 1", listed, name)
	}
	// List names the blobs under the prefix (not other objects of the bucket) with their last
	// put; Delete removes one, and deleting it again is no error.
	if _, err := s.Client().PutObject(ctx, "uploads", "results/"+NewName("video/mp4"), bytes.NewReader(payload), int64(len(payload)), minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	blobs := map[string]time.Time{}
	if err := s.List(ctx, func(n string, put time.Time) error { blobs[n] = put; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(blobs) != 2 || blobs[name].IsZero() || time.Since(blobs[name]) > time.Minute {
		t.Fatalf("List = %v, want two blobs, %s put just now", blobs, name)
	}
	if put, err := s.Stat(ctx, name); err != nil || !put.Equal(blobs[name]) {
		t.Fatalf("Stat(%s) = %v, %v; want %v as List says", name, put, err, blobs[name])
	}
	for range 2 {
		if err := s.Delete(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	left := map[string]time.Time{}
	if err := s.List(ctx, func(n string, put time.Time) error { left[n] = put; return nil }); err != nil {
		t.Fatal(err)
	}
	if _, ok := left[name]; ok || len(left) != 1 {
		t.Fatalf("after Delete of %s List = %v, want the other blob only", name, left)
	}
	if _, err := s.Stat(ctx, name); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Stat of a deleted blob = %v, want ErrNotFound", err)
	}
	// Without the signature the object is private.
	plain := strings.Split(u, "?")[0]
	resp, err = http.Get(plain)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == 200 {
		t.Fatalf("unsigned GET of %s succeeded; objects must not be public", plain)
	}
}

func TestS3ReportsAMissingBucket(t *testing.T) {
	endpoint, access, secret := startVersity(t)
	s, err := NewS3(S3Config{Endpoint: endpoint, Insecure: true, Region: "us-east-1", Bucket: "missing", AccessKey: access, SecretKey: secret})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(context.Background(), NewName("image/png"), "image/png", []byte("x"))
	if err == nil || !strings.Contains(err.Error(), `bucket "missing"`) {
		t.Fatalf("Put into a missing bucket = %v", err)
	}
}

func TestNewS3RefusesBadConfig(t *testing.T) {
	for _, cfg := range []S3Config{{Bucket: "b"}, {Endpoint: "e"}, {Endpoint: "e", Bucket: "b", PresignTTL: 8 * 24 * time.Hour}} {
		if _, err := NewS3(cfg); err == nil {
			t.Errorf("NewS3(%+v) accepted", cfg)
		}
	}
}
