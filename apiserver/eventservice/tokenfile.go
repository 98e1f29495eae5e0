package eventservice

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// WatchTokenFile returns a TokenAuth that accepts the tokens listed in path (one per line; blank
// lines and lines starting with # are skipped) and follows changes to the file, looked at every
// interval until ctx ends, so a token is added or revoked without a restart. Kubernetes updates
// a mounted Secret by swapping a symlink, so the content is compared, not the file's times. A
// file that becomes unreadable or empty keeps the tokens already loaded, and says so in the log.
func WatchTokenFile(ctx context.Context, path string, interval time.Duration, log *slog.Logger) (*TokenAuth, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("service tokens: %w", err)
	}
	auth, err := NewTokenAuth(parseTokens(raw)...)
	if err != nil {
		return nil, fmt.Errorf("service tokens in %s: %w", path, err)
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		last := raw
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			raw, err := os.ReadFile(path)
			if err != nil || bytes.Equal(raw, last) {
				continue // a swap in progress shows as a missing file for a moment
			}
			last = raw
			tokens := parseTokens(raw)
			if err := auth.SetTokens(tokens...); err != nil {
				log.Error("service tokens changed but list none; keeping the previous ones", "path", path)
				continue
			}
			log.Info("service tokens reloaded", "path", path, "tokens", len(tokens))
		}
	}()
	return auth, nil
}

func parseTokens(raw []byte) []string {
	var tokens []string
	for _, line := range strings.Split(string(raw), "\n") {
		if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
			tokens = append(tokens, t)
		}
	}
	return tokens
}
