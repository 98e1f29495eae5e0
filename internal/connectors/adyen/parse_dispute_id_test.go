package adyen_test

import (
	"strings"
	"testing"

	"github.com/videogen-dev/videogen-operator/internal/connectors/adyen"
)

// A dispute's notifications share its pspReference, and one eventCode may come
// again with another additionalData.disputeStatus (CHARGEBACK Pending then Lost): the status is
// part of the id, so the second is another event, not a conflict answered 409 on every retry
// (see apiserver/webhookingress TestAdyenDisputeStatusChangeUnderOneEventCodeIsStored).
// The same item parsed again (Adyen's retry resends it as it was) keeps its id; items without a
// disputeStatus (payments, refunds, disputes processed in Brazil) keep the id they always had.
func TestDisputeStatusIsPartOfAnItemsID(t *testing.T) {
	id := func(code, success, extra string) string {
		t.Helper()
		ev, err := adyen.New().Parse(request(batch(signItem(testKey, "QFQTPCQ8HXSKGK82", "JVBXGSDM53RZNN82", code, success, "500", "EUR", extra))))
		if err != nil {
			t.Fatal(err)
		}
		return ev.MerchantEventID
	}
	for _, tc := range []struct{ code, success, extra, want string }{
		{"CHARGEBACK", "true", `,"disputeStatus":"Pending"`, "QFQTPCQ8HXSKGK82:CHARGEBACK:Pending"},
		{"CHARGEBACK", "true", `,"disputeStatus":"Lost"`, "QFQTPCQ8HXSKGK82:CHARGEBACK:Lost"},
		{"CHARGEBACK_REVERSED", "true", `,"disputeStatus":"Won"`, "QFQTPCQ8HXSKGK82:CHARGEBACK_REVERSED:Won"},
		{"REQUEST_FOR_INFORMATION", "true", `,"disputeStatus":"Expired"`, "QFQTPCQ8HXSKGK82:REQUEST_FOR_INFORMATION:Expired"},
		// Unchanged: no disputeStatus, or one Adyen does not document (additionalData is not
		// signed: a resend with made-up statuses must not make one object per value).
		{"CHARGEBACK", "true", `,"disputeStatus":"Lost2"`, "QFQTPCQ8HXSKGK82:CHARGEBACK"},
		{"CHARGEBACK", "true", `,"disputeStatus":""`, "QFQTPCQ8HXSKGK82:CHARGEBACK"},
		{"CHARGEBACK", "true", ``, "QFQTPCQ8HXSKGK82:CHARGEBACK"},
		{"CAPTURE", "true", ``, "QFQTPCQ8HXSKGK82:CAPTURE"},
		{"REFUND", "false", ``, "QFQTPCQ8HXSKGK82:REFUND:false"},
		{"AUTHORISATION", "true", `,"authCode":"58747"`, "QFQTPCQ8HXSKGK82:AUTHORISATION"},
	} {
		if got := id(tc.code, tc.success, tc.extra); got != tc.want {
			t.Errorf("%s success=%s %s: id %q, want %q", tc.code, tc.success, tc.extra, got, tc.want)
		}
		if again := id(tc.code, tc.success, tc.extra); again != tc.want {
			t.Errorf("%s: a resend has id %q", tc.code, again)
		}
	}
}

// Checked, holds: a dispute item resent with its unsigned eventDate and reason changed (Adyen
// resends may differ there) keeps its id: only the documented disputeStatus was added to it.
func TestDisputeItemResentWithAnotherDateAndReasonKeepsItsID(t *testing.T) {
	item := signItem(testKey, "QFQTPCQ8HXSKGK82", "JVBXGSDM53RZNN82", "CHARGEBACK", "true", "500", "EUR", `,"disputeStatus":"Lost"`)
	resent := strings.Replace(strings.Replace(item, `"2024-03-01T10:00:00+01:00"`, `"2024-03-02T11:30:00+01:00"`, 1),
		`"reason":""`, `"reason":"Fraud: card absent"`, 1)
	if resent == item {
		t.Fatal("the resend is not different")
	}
	for _, it := range []string{item, resent} {
		ev, err := adyen.New().Parse(request(batch(it)))
		if err != nil {
			t.Fatal(err)
		}
		if ev.MerchantEventID != "QFQTPCQ8HXSKGK82:CHARGEBACK:Lost" {
			t.Fatalf("id %q", ev.MerchantEventID)
		}
	}
}
