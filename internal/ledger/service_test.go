package ledger

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// A REST apiserver replica asks the ledger for every submission, many at a time. Its default
// client keeps those connections open between calls (net/http keeps 2 per host, so the rest
// were closed and dialed again for every call) and sets its token source up once for all.
func TestTheClientKeepsItsConnectionsToTheLedger(t *testing.T) {
	var dials, unauthorized atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer replica-token" {
			unauthorized.Add(1)
		}
		writeJSON(w, http.StatusOK, Figures{Balance: 7})
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tokenFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(tokenFile, []byte("replica-token\n"), 0o600))

	c := &Client{URL: srv.URL, TokenFile: tokenFile}
	const concurrent, rounds = 64, 5
	for range rounds {
		var wg sync.WaitGroup
		for range concurrent {
			wg.Go(func() {
				if f, err := c.Balance(context.Background(), "team"); err != nil || f.Balance != 7 {
					t.Errorf("balance %+v, %v", f, err)
				}
			})
		}
		wg.Wait()
	}
	if n := dials.Load(); n > 2*concurrent {
		t.Fatalf("%d connections dialed for %d calls, %d at a time: want them kept open (at most %d)", n, concurrent*rounds, concurrent, 2*concurrent)
	}
	if n := unauthorized.Load(); n != 0 {
		t.Fatalf("%d calls without the token", n)
	}
}
