package eventservice

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"connectrpc.com/connect"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1/eventsv1connect"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

var _ eventsv1connect.EventServiceHandler = (*Service)(nil)

// Handle implements EventService.Handle. Callers are authenticated before it
// runs (see NewHandler); the webhook itself is authenticated here.
func (s *Service) Handle(ctx context.Context, req *connect.Request[eventsv1.HandleRequest]) (*connect.Response[eventsv1.HandleResponse], error) {
	msg := req.Msg
	details := msg.GetRequestDetails()
	if details == nil {
		return nil, connectError(fmt.Errorf("%w: request_details is required", ErrInvalidRequest))
	}
	if err := headerNamedTwice(details.GetHeaders()); err != nil {
		return nil, connectError(err)
	}
	ev, err := s.handle(ctx, msg.GetConnector(), toConnectorsRequest(details),
		requestSecrets(msg.GetWebhookSecrets()), msg.GetMerchantEventId())
	if err != nil {
		return nil, connectError(err)
	}
	return connect.NewResponse(toHandleResponse(ev)), nil
}

func toConnectorsRequest(d *eventsv1.RequestDetails) *connectors.Request {
	// No connector signs or reads the query, so a malformed one is not worth
	// rejecting a webhook for: ParseQuery keeps every pair it could decode.
	query, _ := url.ParseQuery(strings.TrimPrefix(d.GetQueryParams(), "?"))
	return &connectors.Request{
		Method:  d.GetMethod(),
		URI:     d.GetUri(),
		Headers: connectors.HeadersFromMap(d.GetHeaders()),
		Body:    d.GetBody(),
		Query:   query,
	}
}

// headerNamedTwice refuses headers that name one header twice with two values ("Stripe-Signature"
// and "stripe-signature"): names are case-insensitive, and a map has no order, so which value a
// connector read would change from one call to the next.
func headerNamedTwice(headers map[string]string) error {
	seen := make(map[string]string, len(headers))
	for name := range headers {
		canonical := http.CanonicalHeaderKey(name)
		if other, ok := seen[canonical]; ok && headers[other] != headers[name] {
			return fmt.Errorf("%w: header %s is given twice with different values (as %q and %q); header names are case-insensitive",
				ErrInvalidRequest, canonical, min(name, other), max(name, other))
		}
		seen[canonical] = name
	}
	return nil
}

// requestSecrets returns the non-empty secrets the request carries, or nil. They are trimmed
// of surrounding whitespace as the connector Secrets' values are (connectorsecrets): no
// connector's secret has any, and one read from a file with its newline would verify nothing.
func requestSecrets(ws *eventsv1.WebhookSecrets) [][]byte {
	var out [][]byte
	for _, s := range []string{ws.GetSecret(), ws.GetAdditionalSecret()} {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, []byte(s))
		}
	}
	return out
}
