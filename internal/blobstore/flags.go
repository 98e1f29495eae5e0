package blobstore

import (
	"flag"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
)

// Flags choose a Store from the command line: a local directory that the process serves
// itself, or an S3-compatible bucket. The apiserver (uploaded faces) and the reference worker
// (rendered results) bind the same flags, so a deployment configures both the same way.
type Flags struct {
	Kind        string
	Dir         string
	DirMaxBytes int64
	S3          S3Config
}

// Bind registers --blob-store, --blob-dir and the --s3-* flags on fs. what says what is stored
// ("uploaded images", "rendered results"); dir and prefix are the defaults of --blob-dir and
// --s3-prefix.
func (f *Flags) Bind(fs *flag.FlagSet, what, dir, prefix string) {
	fs.StringVar(&f.Kind, "blob-store", "dir", fmt.Sprintf("Where %s go: dir (a local directory served by this process) or s3.", what))
	fs.StringVar(&f.Dir, "blob-dir", dir, fmt.Sprintf("Directory of the embedded blob store for %s (with --blob-store=dir).", what))
	fs.Func("blob-dir-max-bytes", "With --blob-store=dir, the most the directory may hold, in `bytes` (a whole number, or with Ki, Mi or Gi: 1536Mi); a blob that would pass it is refused. Keep it under the volume's size (an emptyDir's sizeLimit: past that the pod is evicted). 0 or unset: no bound.",
		func(v string) error {
			n, err := parseBytes(v)
			f.DirMaxBytes = n
			return err
		})
	fs.StringVar(&f.S3.Endpoint, "s3-endpoint", "", "S3-compatible endpoint host[:port] (with --blob-store=s3).")
	fs.StringVar(&f.S3.Bucket, "s3-bucket", "", fmt.Sprintf("Bucket for %s (with --blob-store=s3); it must exist.", what))
	fs.StringVar(&f.S3.Region, "s3-region", "us-east-1", "Region of the bucket.")
	fs.StringVar(&f.S3.Prefix, "s3-prefix", prefix, "Prefix of the object names.")
	fs.BoolVar(&f.S3.Insecure, "s3-insecure", false, "Use plain HTTP to reach the S3 endpoint.")
	fs.StringVar(&f.S3.PublicBaseURL, "s3-public-base-url", "", "Public URL of the bucket's objects; empty: presigned URLs valid for --s3-presign-ttl.")
	fs.DurationVar(&f.S3.PresignTTL, "s3-presign-ttl", 24*time.Hour, "Lifetime of presigned URLs (at most 7 days); keep it above the task timeout.")
}

// Open builds the Store the flags chose. A Dir names its blobs under dirBaseURL, where the
// caller must serve Dir.Handler. S3 credentials come from the environment (S3_ACCESS_KEY_ID,
// S3_SECRET_ACCESS_KEY, from a Secret), never from flags.
func (f *Flags) Open(dirBaseURL string) (Store, error) {
	switch f.Kind {
	case "dir":
		if err := os.MkdirAll(f.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("--blob-dir: %w", err)
		}
		return &Dir{Root: f.Dir, BaseURL: dirBaseURL, MaxBytes: f.DirMaxBytes}, nil
	case "s3":
		cfg := f.S3
		cfg.AccessKey, cfg.SecretKey = os.Getenv("S3_ACCESS_KEY_ID"), os.Getenv("S3_SECRET_ACCESS_KEY")
		return NewS3(cfg)
	default:
		return nil, fmt.Errorf("--blob-store must be dir or s3, not %q", f.Kind)
	}
}

// parseBytes reads a byte count: a whole number, or one with the binary suffix Ki, Mi or Gi, as
// Kubernetes writes a volume's sizeLimit.
func parseBytes(v string) (int64, error) {
	digits, unit := v, int64(1)
	for suffix, u := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if strings.HasSuffix(v, suffix) {
			digits, unit = strings.TrimSuffix(v, suffix), u
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/unit {
		return 0, fmt.Errorf("not a byte count: %q (a whole number, or with Ki, Mi or Gi: 1536Mi)", v)
	}
	return n * unit, nil
}
