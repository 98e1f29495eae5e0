package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

var shortBody = []byte(`{"template_id":"` + TemplateName + `","face":"` + FaceURL + `"}`)

// SubmitShort posts one POST /v1/videos/short with a fresh Idempotency-Key, expects 202 and
// returns the task id.
func (a *APIServer) SubmitShort(ctx context.Context, acct Account) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.URL+"/v1/videos/short", bytes.NewReader(shortBody))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+acct.Key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", RandomHex(16))
	resp, err := a.HTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("POST /v1/videos/short: %d %s", resp.StatusCode, raw)
	}
	var v struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.ID == "" {
		return "", fmt.Errorf("no task id in %s", raw)
	}
	return v.ID, nil
}

// WaitForKeys waits until the apiserver's informer knows every account's key.
func (a *APIServer) WaitForKeys(ctx context.Context, accts []Account) error {
	for _, acct := range accts {
		end := time.Now().Add(60 * time.Second)
		for {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, a.URL+"/v1/balance", nil)
			req.Header.Set("Authorization", "Bearer "+acct.Key)
			resp, err := a.HTTP.Do(req)
			if err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Now().After(end) || ctx.Err() != nil {
				return fmt.Errorf("the apiserver did not learn the key of %s within 60s", acct.Namespace)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}
