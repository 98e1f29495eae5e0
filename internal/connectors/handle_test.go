package connectors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

// fake is a connector whose behaviour the test controls.
type fake struct {
	verifyErr error
	event     connectors.Event
	parseErr  error
	verified  bool
}

func (f *fake) Name() string { return "fake" }

func (f *fake) Verify(*connectors.Request, [][]byte, time.Time) error {
	f.verified = true
	return f.verifyErr
}

func (f *fake) Parse(*connectors.Request) (*connectors.Event, error) {
	if f.parseErr != nil {
		return nil, f.parseErr
	}
	ev := f.event
	return &ev, nil
}

var body = []byte("abc")

// sha256("abc"), from FIPS 180-2 appendix B.1 (also `printf abc | sha256sum`).
const abcHash = "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"

func TestHandleMerchantEventID(t *testing.T) {
	payment := &connectors.PaymentDetails{PaymentID: "p1"}
	tests := []struct {
		name      string
		event     connectors.Event
		callerID  string
		wantID    string
		wantFinal bool
	}{
		{"caller id wins", connectors.Event{Type: connectors.PaymentIntentSuccess, MerchantEventID: "evt_1", Payment: payment}, "mine", "mine", true},
		{"processor id", connectors.Event{Type: connectors.PaymentIntentSuccess, MerchantEventID: "evt_1", Payment: payment}, "", "evt_1", true},
		{"body hash", connectors.Event{Type: connectors.PaymentIntentSuccess, Payment: payment}, "", abcHash, true},
		{"unsupported is not complete", connectors.Event{Type: connectors.EventTypeUnsupported}, "", abcHash, false},
		{"details without id are not complete", connectors.Event{Type: connectors.ChargeRefunded, Refund: &connectors.RefundDetails{}}, "", abcHash, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &fake{event: tt.event}
			ev, err := connectors.HandleWith(context.Background(), f, &connectors.Request{Body: body}, connectors.SecretsFromStrings("s"), tt.callerID, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if ev.MerchantEventID != tt.wantID || ev.Complete != tt.wantFinal || ev.Connector != "fake" {
				t.Fatalf("event = %+v", ev)
			}
		})
	}
}

func TestHandleItems(t *testing.T) {
	f := &fake{event: connectors.Event{Type: connectors.DisputeWon, Items: []connectors.Event{
		{Type: connectors.DisputeWon, MerchantEventID: "a:CHARGEBACK_REVERSED", Dispute: &connectors.DisputeDetails{DisputeID: "a"}},
		{Type: connectors.EventTypeUnsupported},
	}}}
	ev, err := connectors.HandleWith(context.Background(), f, &connectors.Request{Body: body}, connectors.SecretsFromStrings("s"), "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if ev.Items[0].MerchantEventID != "a:CHARGEBACK_REVERSED" || !ev.Items[0].Complete ||
		ev.Items[1].MerchantEventID != abcHash+"#1" || ev.Items[1].Complete || ev.Items[1].Connector != "fake" {
		t.Fatalf("items = %+v", ev.Items)
	}
}

func TestHandleErrors(t *testing.T) {
	authErr := &connectors.AuthError{Connector: "fake", Reason: "no matching signature"}
	parseErr := &connectors.ParseError{Connector: "fake", Err: errors.New("bad json")}

	_, err := connectors.HandleWith(context.Background(), &fake{verifyErr: authErr}, &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now())
	if !errors.Is(err, authErr) {
		t.Fatalf("verify error not passed through: %v", err)
	}
	_, err = connectors.HandleWith(context.Background(), &fake{parseErr: parseErr}, &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now())
	if !errors.Is(err, parseErr) {
		t.Fatalf("parse error not passed through: %v", err)
	}

	// No usable secret: rejected before the connector is even asked.
	f := &fake{}
	_, err = connectors.HandleWith(context.Background(), f, &connectors.Request{}, [][]byte{nil, {}}, "", time.Now())
	var ae *connectors.AuthError
	if !errors.As(err, &ae) || !strings.Contains(ae.Error(), "fake") || !strings.Contains(ae.Error(), "no webhook secret") || f.verified {
		t.Fatalf("err = %v, verified = %v", err, f.verified)
	}

	var pe *connectors.ParseError
	if _, err = connectors.HandleWith(context.Background(), &fake{}, nil, connectors.SecretsFromStrings("s"), "", time.Now()); !errors.As(err, &pe) {
		t.Fatalf("nil request: %v", err)
	}
	if _, err = connectors.HandleWith(context.Background(), nil, &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now()); !errors.Is(err, connectors.ErrUnknownConnector) {
		t.Fatalf("nil connector: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err = connectors.HandleWith(ctx, &fake{}, &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now()); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled context: %v", err)
	}
}

type nilParser struct{ fake }

func (nilParser) Parse(*connectors.Request) (*connectors.Event, error) { return nil, nil }

func TestHandleNilEvent(t *testing.T) {
	var pe *connectors.ParseError
	_, err := connectors.HandleWith(context.Background(), &nilParser{}, &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now())
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want *ParseError", err)
	}
}

func TestErrorMessages(t *testing.T) {
	if got := (&connectors.AuthError{Connector: "stripe", Reason: "missing Stripe-Signature header"}).Error(); got !=
		"stripe webhook not authenticated: missing Stripe-Signature header" {
		t.Fatal(got)
	}
	inner := errors.New("unexpected end of JSON input")
	pe := &connectors.ParseError{Connector: "adyen", Err: inner}
	if pe.Error() != "cannot parse the adyen webhook body: unexpected end of JSON input" || !errors.Is(pe, inner) {
		t.Fatal(pe.Error())
	}
}

func TestRegistry(t *testing.T) {
	r, err := connectors.NewRegistry(&fake{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Register(&fake{}); err == nil {
		t.Fatal("duplicate name accepted")
	}
	if err := r.Register(nil); err == nil {
		t.Fatal("nil connector accepted")
	}
	if _, err := r.Lookup("nope"); !errors.Is(err, connectors.ErrUnknownConnector) || !strings.Contains(err.Error(), `"nope"`) {
		t.Fatalf("Lookup: %v", err)
	}
	if names := r.Names(); len(names) != 1 || names[0] != "fake" {
		t.Fatalf("Names = %v", names)
	}
	if _, err := r.Handle(context.Background(), "nope", &connectors.Request{}, connectors.SecretsFromStrings("s"), "", time.Now()); !errors.Is(err, connectors.ErrUnknownConnector) {
		t.Fatalf("Handle: %v", err)
	}
	var zero connectors.Registry
	if _, err := zero.Lookup("x"); !errors.Is(err, connectors.ErrUnknownConnector) {
		t.Fatalf("zero registry: %v", err)
	}
}

func TestSecretsFromStrings(t *testing.T) {
	got := connectors.SecretsFromStrings("a", "", "whsec_b")
	if len(got) != 3 || string(got[0]) != "a" || len(got[1]) != 0 || string(got[2]) != "whsec_b" {
		t.Fatalf("got %q", got)
	}
}

// A body of the wrong JSON shape is described in JSON's terms: the connector's Go types
// ("Go struct field object.data.object.amount of type int64") are internals the sender of the
// webhook must not see.
func TestParseErrorOfAWrongJSONType(t *testing.T) {
	type object struct {
		Amount int64 `json:"amount"`
	}
	type event struct {
		Data struct {
			Object object `json:"object"`
		} `json:"data"`
	}
	for _, tc := range []struct{ body, want string }{
		{`{"data":{"object":{"amount":"12"}}}`, "field data.object.amount is a JSON string, want an integer"},
		{`{"data":"x"}`, "field data is a JSON string, want an object"},
		{`[1,2]`, "the body is a JSON array, want an object"},
	} {
		var e event
		err := json.Unmarshal([]byte(tc.body), &e)
		if err == nil {
			t.Fatalf("%s: no error", tc.body)
		}
		pe := &connectors.ParseError{Connector: "stripe", Err: err}
		want := "cannot parse the stripe webhook body: " + tc.want
		if got := pe.Error(); got != want {
			t.Errorf("%s:\n got %q\nwant %q", tc.body, got, want)
		}
		if !errors.Is(pe, err) {
			t.Errorf("%s: the json error is no longer wrapped", tc.body)
		}
	}
}
