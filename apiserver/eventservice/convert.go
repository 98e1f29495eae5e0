package eventservice

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/videogen-dev/videogen-operator/apiserver/eventservice/gen/eventsv1"
	"github.com/videogen-dev/videogen-operator/internal/connectors"
)

func toHandleResponse(ev *connectors.Event) *eventsv1.HandleResponse {
	resp := &eventsv1.HandleResponse{
		EventType:          toEventType(ev.Type),
		SourceVerified:     true, // unverified webhooks never get this far
		MerchantEventId:    ev.MerchantEventID,
		EventStatus:        toEventStatus(ev.Complete),
		ConnectorEventType: ev.ConnectorEventType,
		OccurredAt:         timestamp(ev.OccurredAt),
	}
	switch {
	case ev.Payment != nil:
		resp.EventResponse = &eventsv1.HandleResponse_Payment{Payment: toPayment(ev.Payment)}
	case ev.Refund != nil:
		resp.EventResponse = &eventsv1.HandleResponse_Refund{Refund: toRefund(ev.Refund)}
	case ev.Dispute != nil:
		resp.EventResponse = &eventsv1.HandleResponse_Dispute{Dispute: toDispute(ev.Dispute)}
	}
	for i := range ev.Items {
		resp.Items = append(resp.Items, toBatchItem(&ev.Items[i]))
	}
	return resp
}

func toBatchItem(ev *connectors.Event) *eventsv1.BatchItem {
	item := &eventsv1.BatchItem{
		EventType:          toEventType(ev.Type),
		MerchantEventId:    ev.MerchantEventID,
		EventStatus:        toEventStatus(ev.Complete),
		ConnectorEventType: ev.ConnectorEventType,
		OccurredAt:         timestamp(ev.OccurredAt),
	}
	switch {
	case ev.Payment != nil:
		item.EventResponse = &eventsv1.BatchItem_Payment{Payment: toPayment(ev.Payment)}
	case ev.Refund != nil:
		item.EventResponse = &eventsv1.BatchItem_Refund{Refund: toRefund(ev.Refund)}
	case ev.Dispute != nil:
		item.EventResponse = &eventsv1.BatchItem_Dispute{Dispute: toDispute(ev.Dispute)}
	}
	return item
}

// toEventType relies on the proto enum values being named exactly like the
// connectors' event types (see events.proto); a test checks that every
// connectors type has its value.
func toEventType(t connectors.EventType) eventsv1.EventType {
	return eventsv1.EventType(eventsv1.EventType_value[string(t)])
}

func toEventStatus(complete bool) eventsv1.EventStatus {
	if complete {
		return eventsv1.EventStatus_EVENT_STATUS_COMPLETE
	}
	return eventsv1.EventStatus_EVENT_STATUS_INCOMPLETE
}

func toPayment(p *connectors.PaymentDetails) *eventsv1.PaymentDetails {
	return &eventsv1.PaymentDetails{
		PaymentId:              p.PaymentID,
		ConnectorTransactionId: p.ConnectorTransactionID,
		MerchantReference:      p.MerchantReference,
		AmountMinor:            p.AmountMinor,
		Currency:               p.Currency,
		Status:                 p.Status,
		Reason:                 p.Reason,
		CreatedAt:              timestamp(p.CreatedAt),
	}
}

func toRefund(r *connectors.RefundDetails) *eventsv1.RefundDetails {
	return &eventsv1.RefundDetails{
		RefundId:               r.RefundID,
		PaymentId:              r.PaymentID,
		ConnectorTransactionId: r.ConnectorTransactionID,
		MerchantReference:      r.MerchantReference,
		AmountMinor:            r.AmountMinor,
		Currency:               r.Currency,
		Status:                 r.Status,
		Reason:                 r.Reason,
		CreatedAt:              timestamp(r.CreatedAt),
	}
}

func toDispute(d *connectors.DisputeDetails) *eventsv1.DisputeDetails {
	return &eventsv1.DisputeDetails{
		DisputeId:              d.DisputeID,
		PaymentId:              d.PaymentID,
		ConnectorTransactionId: d.ConnectorTransactionID,
		MerchantReference:      d.MerchantReference,
		AmountMinor:            d.AmountMinor,
		Currency:               d.Currency,
		Status:                 d.Status,
		Reason:                 d.Reason,
		CreatedAt:              timestamp(d.CreatedAt),
	}
}

// timestamp leaves unknown times unset rather than sending year 1.
func timestamp(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
