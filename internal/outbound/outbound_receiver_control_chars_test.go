package outbound

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	videogenv1alpha1 "github.com/videogen-dev/videogen-operator/api/v1alpha1"
	"github.com/videogen-dev/videogen-operator/internal/standardwebhooks"
)

// What a receiver sends reaches an attempt's error in more ways than
// its reason phrase. Its TLS certificate's names are one: Go checks the host name before the
// chain, and its error lists the certificate's DNS names as they are ("x509: certificate is
// valid for <names>, not localhost"), and a DNS name may hold any ASCII byte, ESC and BEL
// included. Record put that text into status.webhook.lastError (and the WebhookRetrying /
// WebhookFailed events quote it), which kubectl prints as it is: a tenant's https receiver
// wrote terminal escape sequences into what an operator reads.
//
// Want: Record, the one place an attempt's error enters a status, keeps only printable, valid
// UTF-8 text, whatever produced the error.
func TestRecordKeepsAReceiversControlCharactersOut(t *testing.T) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "receiver"},
		DNSNames:  []string{"\x1b]0;owned\x07\x1b[2Jevil.example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	srv.StartTLS()
	defer srv.Close()

	url := "https://localhost:" + srv.URL[strings.LastIndex(srv.URL, ":")+1:] + "/hook"
	res := Send(context.Background(), NewGuardedClient(loopback, time.Second),
		Message{URL: url, ID: "msg_1", Secrets: []string{standardwebhooks.NewSecret()}, Body: []byte("{}")}, time.Now())
	if res.Outcome != Retry || res.Err == nil || !strings.Contains(res.Err.Error(), "owned") {
		t.Fatalf("Send = %+v, want a Retry whose error quotes the certificate's names", res)
	}
	var d videogenv1alpha1.DeliveryAttempts
	Record(&d, res, time.Now())
	if !utf8.ValidString(d.LastError) || strings.IndexFunc(d.LastError, func(r rune) bool { return !unicode.IsGraphic(r) }) >= 0 {
		t.Fatalf("last_error %q carries the receiver's control characters", d.LastError)
	}
	Record(&d, Attempt{Outcome: Retry, Err: errorString("answered 503 \xff\u202egpj.exe")}, time.Now())
	if !utf8.ValidString(d.LastError) || strings.IndexFunc(d.LastError, func(r rune) bool { return !unicode.IsGraphic(r) }) >= 0 {
		t.Fatalf("last_error %q carries invalid UTF-8 or a bidirectional override", d.LastError)
	}
	Record(&d, Attempt{Outcome: Retry, Err: errorString("a\r\nb\tc")}, time.Now())
	if d.LastError != "a  b c" {
		t.Fatalf("last_error %q, want line breaks and tabs as spaces", d.LastError)
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
