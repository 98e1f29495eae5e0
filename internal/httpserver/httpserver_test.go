package httpserver

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// serve runs handler as the binaries do and returns its address.
func serve(t *testing.T, handler http.Handler, timeouts Timeouts) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New("", handler, timeouts)
	go func() { _ = srv.Serve(Listener(l)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// exchange writes raw to a fresh connection and reads one response.
func exchange(t *testing.T, addr, raw string) *http.Response {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	go func() { _, _ = io.WriteString(c, raw) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func expectEnvelope(t *testing.T, resp *http.Response, status int, code string) {
	t.Helper()
	var body struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"request_id"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("%d answered without the error envelope: %v", resp.StatusCode, err)
	}
	if resp.StatusCode != status || body.Error.Code != code || body.Error.Message == "" ||
		body.Error.RequestID == "" || body.Error.RequestID != resp.Header.Get("X-Request-Id") ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("answer %d %+v (headers %v), want %d %s in the envelope", resp.StatusCode, body.Error, resp.Header, status, code)
	}
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })

func TestNetHTTPsOwnAnswersAreInTheEnvelope(t *testing.T) {
	addr := serve(t, ok, DefaultTimeouts())
	huge := "GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n"
	expectEnvelope(t, exchange(t, addr, huge), http.StatusRequestHeaderFieldsTooLarge, "request_header_fields_too_large")
	expectEnvelope(t, exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), http.StatusBadRequest, "invalid_request")
	expectEnvelope(t, exchange(t, addr, "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), http.StatusNotImplemented, "not_implemented")
	expectEnvelope(t, exchange(t, addr, "GARBAGE\r\n\r\n"), http.StatusBadRequest, "invalid_request")
}

func TestOrdinaryAnswersAreUntouched(t *testing.T) {
	file := filepath.Join(t.TempDir(), "blob")
	if err := os.WriteFile(file, []byte(strings.Repeat("b", 1<<20)), 0o600); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ok", ok)
	// A plain-text answer of a handler, and a file sent with sendfile (through ReadFrom).
	mux.HandleFunc("/text", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "teapot", http.StatusTeapot) })
	mux.HandleFunc("/file", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, file) })
	addr := serve(t, mux, DefaultTimeouts())
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}} // one kept-alive connection
	for range 2 {
		for path, want := range map[string]int{"/ok": 200, "/text": 418, "/file": 200} {
			resp, err := client.Get("http://" + addr + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != want || (path == "/file" && len(body) != 1<<20) || (path == "/text" && string(body) != "teapot\n") {
				t.Fatalf("GET %s = %d with %d bytes", path, resp.StatusCode, len(body))
			}
		}
	}
}

// A client that sends its body a byte at a time is cut off at the read deadline, and the
// handler sees a timeout, not a body.
func TestASlowBodyIsCutOffAtTheReadDeadline(t *testing.T) {
	readErr := make(chan error, 1)
	addr := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		w.WriteHeader(http.StatusRequestTimeout)
	}), Timeouts{ReadHeader: 300 * time.Millisecond, Read: 500 * time.Millisecond})

	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c) // ends when the server closes the connection
		close(closed)
	}()
	for {
		select {
		case <-closed:
			if elapsed := time.Since(start); elapsed > 3*time.Second {
				t.Fatalf("the connection was closed after %v", elapsed)
			}
			var netErr net.Error
			if err := <-readErr; !errors.As(err, &netErr) || !netErr.Timeout() {
				t.Fatalf("the handler read %v, want a timeout", err)
			}
			return
		case <-time.After(100 * time.Millisecond):
			if time.Since(start) > 5*time.Second {
				t.Fatal("a body sent a byte every 100 ms kept the connection open for 5 s")
			}
			_, _ = c.Write([]byte("x"))
		}
	}
}

func TestSlowHeadersAreCutOff(t *testing.T) {
	addr := serve(t, ok, Timeouts{ReadHeader: 300 * time.Millisecond, Read: time.Second})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	for time.Since(start) < 5*time.Second {
		if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
			break
		}
		_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			break // closed by the server
		}
	}
	if elapsed := time.Since(start); elapsed > 3*time.Second {
		t.Fatalf("headers sent a line every 100 ms kept the connection open for %v", elapsed)
	}
}

func TestTimeoutsMustBeSet(t *testing.T) {
	if err := DefaultTimeouts().Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Timeouts{{ReadHeader: 0, Read: time.Second}, {ReadHeader: time.Second, Read: 0}, {ReadHeader: time.Minute, Read: time.Second}} {
		if bad.Check() == nil {
			t.Errorf("%+v passed the check", bad)
		}
	}
}
