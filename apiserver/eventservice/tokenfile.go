package eventservice

import (
	"crypto/sha256"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/filereload"
)

// TokenFileAuth returns a TokenAuth that accepts the tokens listed in path (one per line; blank
// lines and lines starting with # are skipped) and follows changes to the file, looked at most
// once per interval, so a token is added or revoked without a restart. A file that becomes
// empty keeps the tokens already loaded, and says so in the log.
func TokenFileAuth(path string, interval time.Duration, log *slog.Logger) (*TokenAuth, error) {
	file, err := filereload.Open(path, interval, parseTokenFile, func(digests [][sha256.Size]byte, err error) {
		if err != nil {
			log.Error("service tokens changed but cannot be used; keeping the previous ones", "path", path, "error", err)
			return
		}
		log.Info("service tokens reloaded", "path", path, "tokens", len(digests))
	})
	if err != nil {
		return nil, fmt.Errorf("service tokens: %w", err)
	}
	return &TokenAuth{file: file}, nil
}

func parseTokenFile(raw []byte) ([][sha256.Size]byte, error) {
	var tokens []string
	for _, line := range strings.Split(string(raw), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			tokens = append(tokens, t)
		}
	}
	return digestsOf(tokens)
}
