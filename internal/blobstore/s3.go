package blobstore

import (
	"bytes"
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config reaches an S3-compatible object store (AWS S3, MinIO, Ceph, Versity…).
type S3Config struct {
	// Endpoint is host[:port], without a scheme.
	Endpoint string
	// Insecure uses plain HTTP (for an in-cluster store without TLS).
	Insecure  bool
	Region    string
	Bucket    string
	AccessKey string
	SecretKey string
	// Prefix is prepended to object names, e.g. "uploads/".
	Prefix string
	// PublicBaseURL, if set, is where objects are readable without credentials (a CDN or a
	// public bucket); otherwise Put returns a presigned GET URL valid for PresignTTL.
	PublicBaseURL string
	PresignTTL    time.Duration
}

// S3 stores blobs in a bucket.
type S3 struct {
	cfg    S3Config
	client *minio.Client
}

// NewS3 connects to the store; it does not create the bucket (an operator's decision).
func NewS3(cfg S3Config) (*S3, error) {
	if cfg.Endpoint == "" || cfg.Bucket == "" {
		return nil, fmt.Errorf("blob store: S3 endpoint and bucket are required")
	}
	if cfg.PresignTTL <= 0 {
		cfg.PresignTTL = 24 * time.Hour
	}
	if cfg.PresignTTL > 7*24*time.Hour {
		return nil, fmt.Errorf("blob store: presigned URLs live at most 7 days, not %s", cfg.PresignTTL)
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:  credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Secure: !cfg.Insecure,
		Region: cfg.Region,
	})
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return &S3{cfg: cfg, client: c}, nil
}

// Client is the underlying S3 client (for setup such as creating a bucket).
func (s *S3) Client() *minio.Client { return s.client }

// Put implements Store. Putting a name again overwrites the object with the same bytes (on a
// versioned bucket, a version more).
func (s *S3) Put(ctx context.Context, name, contentType string, data []byte) (string, error) {
	name = s.cfg.Prefix + name
	_, err := s.client.PutObject(ctx, s.cfg.Bucket, name, bytes.NewReader(data), int64(len(data)),
		minio.PutObjectOptions{ContentType: contentType})
	if err != nil {
		return "", fmt.Errorf("blob store: putting %s into bucket %q: %w", name, s.cfg.Bucket, err)
	}
	if s.cfg.PublicBaseURL != "" {
		return strings.TrimSuffix(s.cfg.PublicBaseURL, "/") + "/" + name, nil
	}
	u, err := s.client.PresignedGetObject(ctx, s.cfg.Bucket, name, s.cfg.PresignTTL, url.Values{})
	if err != nil {
		return "", fmt.Errorf("blob store: presigning %s: %w", name, err)
	}
	return u.String(), nil
}

// Delete implements Store. S3 answers a delete of a missing object with success.
func (s *S3) Delete(ctx context.Context, name string) error {
	key := s.cfg.Prefix + name
	if err := s.client.RemoveObject(ctx, s.cfg.Bucket, key, minio.RemoveObjectOptions{}); err != nil {
		return fmt.Errorf("blob store: deleting %s from bucket %q: %w", key, s.cfg.Bucket, err)
	}
	return nil
}

// Stat implements Store: the put time is the object's last modification (an overwrite counts).
func (s *S3) Stat(ctx context.Context, name string) (time.Time, error) {
	key := s.cfg.Prefix + name
	info, err := s.client.StatObject(ctx, s.cfg.Bucket, key, minio.StatObjectOptions{})
	switch {
	case minio.ToErrorResponse(err).Code == minio.NoSuchKey:
		return time.Time{}, fmt.Errorf("blob store: %s in bucket %q: %w", key, s.cfg.Bucket, ErrNotFound)
	case err != nil:
		return time.Time{}, fmt.Errorf("blob store: reading %s in bucket %q: %w", key, s.cfg.Bucket, err)
	}
	return info.LastModified, nil
}

// List implements Store: the objects under Prefix whose rest is a blob name, put when they
// were last modified (an overwrite counts).
func (s *S3) List(ctx context.Context, fn func(name string, put time.Time) error) error {
	ctx, cancel := context.WithCancel(ctx) // ends the listing when fn stops it early
	defer cancel()
	for obj := range s.client.ListObjects(ctx, s.cfg.Bucket, minio.ListObjectsOptions{Prefix: s.cfg.Prefix, Recursive: true}) {
		if obj.Err != nil {
			return fmt.Errorf("blob store: listing bucket %q: %w", s.cfg.Bucket, obj.Err)
		}
		name := strings.TrimPrefix(obj.Key, s.cfg.Prefix)
		if !validName.MatchString(name) {
			continue
		}
		if err := fn(name, obj.LastModified); err != nil {
			return err
		}
	}
	return nil
}
