package authorizenet

import (
	"encoding/json"
	"errors"

	"github.com/videogen-dev/videogen-operator/internal/connectors"
	"github.com/videogen-dev/videogen-operator/internal/connectors/internal/norm"
)

// notification is an Authorize.net webhook body (payload examples in the
// appendix of https://developer.authorize.net/api/reference/features/webhooks.html).
type notification struct {
	NotificationID string `json:"notificationId"`
	EventType      string `json:"eventType"`
	EventDate      string `json:"eventDate"`
	Payload        struct {
		ResponseCode        int         `json:"responseCode"`
		AuthCode            string      `json:"authCode"`
		AuthAmount          json.Number `json:"authAmount"`
		MerchantReferenceID string      `json:"merchantReferenceId"`
		InvoiceNumber       string      `json:"invoiceNumber"`
		EntityName          string      `json:"entityName"`
		ID                  string      `json:"id"`
	} `json:"payload"`
}

// Transaction response codes (responseCode in the payload).
const (
	approved = 1
	declined = 2
	failed   = 3
	held     = 4
)

// Parse implements connectors.Connector.
func (c *Connector) Parse(req *connectors.Request) (*connectors.Event, error) {
	var n notification
	if err := json.Unmarshal(req.Body, &n); err != nil {
		return nil, parseErr(err)
	}
	if n.EventType == "" {
		return nil, parseErr(errors.New("notification has no eventType"))
	}
	ev := &connectors.Event{
		Type:               connectors.EventTypeUnsupported,
		ConnectorEventType: n.EventType,
		MerchantEventID:    n.NotificationID,
		OccurredAt:         norm.Time(n.EventDate),
	}
	p := &n.Payload
	t, isRefund := classify(n.EventType, p.ResponseCode)
	if t == connectors.EventTypeUnsupported {
		return ev, nil
	}
	var amount int64
	if p.AuthAmount != "" {
		// Amounts are decimals in major units; every currency Authorize.net
		// settles in has two minor digits.
		a, err := norm.DecimalToMinor(p.AuthAmount.String(), 2)
		if err != nil {
			return nil, parseErr(err)
		}
		amount = a
	}
	ref := p.MerchantReferenceID
	if ref == "" {
		ref = p.InvoiceNumber
	}
	ev.Type = t
	if isRefund {
		// The refund notification does not name the refunded transaction.
		ev.Refund = &connectors.RefundDetails{
			RefundID: p.ID, ConnectorTransactionID: p.ID, MerchantReference: ref,
			AmountMinor: amount, Currency: c.currency, Status: responseStatus(p.ResponseCode),
		}
		return ev, nil
	}
	ev.Payment = &connectors.PaymentDetails{
		PaymentID: p.ID, ConnectorTransactionID: p.ID, MerchantReference: ref,
		AmountMinor: amount, Currency: c.currency, Status: responseStatus(p.ResponseCode),
	}
	return ev, nil
}

// classify maps eventType, refined by responseCode where the same event is
// sent for approved, declined and held transactions.
func classify(eventType string, responseCode int) (t connectors.EventType, isRefund bool) {
	switch eventType {
	case "net.authorize.payment.authcapture.created":
		return byResponse(responseCode, connectors.PaymentIntentSuccess), false
	case "net.authorize.payment.authorization.created":
		return byResponse(responseCode, connectors.PaymentIntentAuthorizationSuccess), false
	case "net.authorize.payment.capture.created", "net.authorize.payment.priorAuthCapture.created":
		switch responseCode {
		case declined, failed:
			return connectors.PaymentIntentCaptureFailure, false
		case held:
			// Held for review: nothing captured yet, and the review may decline it.
			return connectors.PaymentIntentProcessing, false
		}
		return connectors.PaymentIntentCaptureSuccess, false
	case "net.authorize.payment.void.created":
		// A void declined, errored or held for review leaves the payment as it was:
		// nothing to map (as a failed Adyen CANCELLATION).
		switch responseCode {
		case declined, failed, held:
			return connectors.EventTypeUnsupported, false
		}
		return connectors.PaymentIntentCanceled, false
	case "net.authorize.payment.fraud.held":
		return connectors.PaymentIntentProcessing, false
	case "net.authorize.payment.fraud.approved":
		// A held transaction released by review: authorized, capture follows
		// per the transaction type.
		return connectors.PaymentIntentAuthorizationSuccess, false
	case "net.authorize.payment.fraud.declined":
		return connectors.PaymentIntentPaymentFailed, false
	case "net.authorize.payment.refund.created":
		switch responseCode {
		case declined, failed:
			return connectors.RefundFailure, true
		case held:
			return connectors.RefundProcessing, true
		}
		return connectors.ChargeRefunded, true
	}
	return connectors.EventTypeUnsupported, false
}

func byResponse(responseCode int, onApproved connectors.EventType) connectors.EventType {
	switch responseCode {
	case declined, failed:
		return connectors.PaymentIntentPaymentFailed
	case held:
		return connectors.PaymentIntentProcessing
	}
	return onApproved
}

func responseStatus(code int) string {
	switch code {
	case approved:
		return "approved"
	case declined:
		return "declined"
	case failed:
		return "error"
	case held:
		return "held"
	}
	return ""
}

func parseErr(err error) error { return &connectors.ParseError{Connector: Name, Err: err} }
