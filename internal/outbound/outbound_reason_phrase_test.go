package outbound

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// The reason phrase of a receiver's status line ("HTTP/1.1 503
// <anything>") is the receiver's own bytes, and Send put it verbatim into the attempt's error:
// a completion webhook's status.webhook.lastError and its Warning events (WebhookRetrying,
// WebhookStopped, WebhookFailed), which kubectl describe and kubectl get events print as they
// are. Any tenant picks its receiver, so a tenant's receiver wrote terminal escape sequences
// (retitle the window, clear the screen, OSC 8 links) and invalid UTF-8 into what an operator
// reads; net/http checks none of it.
//
// Want: the status said as its code and the standard reason ("answered 503 Service
// Unavailable"), printable and valid UTF-8 whatever the receiver sent.
func TestSendDoesNotQuoteTheReceiversReasonPhrase(t *testing.T) {
	for _, code := range []int{http.StatusServiceUnavailable, http.StatusGone, http.StatusTemporaryRedirect, 599} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			r := bufio.NewReader(c)
			if _, err := http.ReadRequest(r); err != nil {
				return
			}
			_, _ = c.Write([]byte("HTTP/1.1 " + strconv.Itoa(code) + " \x1b]0;owned\x07\x1b[2J\xffclick\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		}()
		res := Send(context.Background(), NewGuardedClient(loopback, time.Second),
			Message{URL: "http://" + ln.Addr().String() + "/hook", ID: "msg_1", Secrets: []string{standardwebhooks.NewSecret()}, Body: []byte("{}")}, time.Now())
		_ = ln.Close()
		if res.Status != code || res.Err == nil {
			t.Fatalf("%d: Send = %+v, want an undelivered %d", code, res, code)
		}
		msg := res.Err.Error()
		if !utf8.ValidString(msg) || strings.IndexFunc(msg, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
			t.Errorf("%d: the attempt's error %q carries the receiver's control characters or invalid UTF-8", code, msg)
		}
		want := "answered " + strconv.Itoa(code)
		if text := http.StatusText(code); text != "" {
			want += " " + text
		}
		if !strings.HasPrefix(msg, want) {
			t.Errorf("%d: the attempt's error %q, want it to start %q", code, msg, want)
		}
	}
}
