package eventservice

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/filereload"
)

// TokenFileAuth returns a TokenAuth that accepts the tokens listed in path (one per line; blank
// lines and lines starting with # are skipped) and follows changes to the file, looked at most
// once per interval, so a token is added or revoked without a restart. A file that becomes
// empty, or holds no usable token, keeps the tokens already loaded, and says so in the log.
// After the start, a line that is no usable token (too short or too long) is logged and
// ignored while the file's other tokens take effect, so removing a token revokes it; but a
// bad last line without a newline may be a rewrite read mid-way, and keeps the previous tokens.
func TokenFileAuth(path string, interval time.Duration, log *slog.Logger) (*TokenAuth, error) {
	file, err := filereload.Open(path, interval, parseTokenFile, func(tokens fileTokens, err error) {
		if err != nil {
			log.Error("service tokens changed but cannot be used; keeping the previous ones", "path", path, "error", err)
			return
		}
		log.Info("service tokens reloaded", "path", path, "tokens", len(tokens.digests))
		for _, refused := range tokens.refused {
			log.Error("a line of the service tokens file is not a usable token; it is ignored", "path", path, "error", refused)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("service tokens: %w", err)
	}
	// At start a bad line is refused outright: the operator is there to see it.
	if refused := file.Current().refused; len(refused) > 0 {
		return nil, fmt.Errorf("service tokens: %s: %w", path, errors.Join(refused...))
	}
	return &TokenAuth{file: file}, nil
}

// fileTokens is one read of the tokens file: the digests of its usable tokens, and why each
// other token line was refused.
type fileTokens struct {
	digests [][sha256.Size]byte
	refused []error
}

// parseTokenFile fails when no line is a usable token, or when the last one is not and has no
// newline (the file may be read mid-way through an in-place rewrite, cut inside a token): the
// previous tokens then stay. Any other bad line is refused on its own: refusing the whole file
// for it would keep a token the same edit removed.
func parseTokenFile(raw []byte) (fileTokens, error) {
	var tokens fileTokens
	lines := strings.Split(string(raw), "\n")
	for i, line := range lines {
		t := strings.TrimSpace(line)
		if t == "" || strings.HasPrefix(t, "#") {
			continue
		}
		if err := checkToken(t); err != nil {
			if i == len(lines)-1 {
				return fileTokens{}, fmt.Errorf("the last line, with no newline, may be cut short: %w", err)
			}
			tokens.refused = append(tokens.refused, err)
			continue
		}
		tokens.digests = append(tokens.digests, sha256.Sum256([]byte(t)))
	}
	if len(tokens.digests) == 0 {
		return fileTokens{}, errors.Join(append([]error{errNoToken}, tokens.refused...)...)
	}
	return tokens, nil
}
