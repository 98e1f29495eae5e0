package adyen

import (
	"bytes"
	"encoding/json"
	"errors"
)

// notification is the NotificationRequest body
// (https://docs.adyen.com/api-explorer/Webhooks/1/overview).
type notification struct {
	NotificationItems []struct {
		Item *item `json:"NotificationRequestItem"`
	} `json:"notificationItems"`
}

type item struct {
	PSPReference        string `json:"pspReference"`
	OriginalReference   string `json:"originalReference"`
	MerchantAccountCode string `json:"merchantAccountCode"`
	MerchantReference   string `json:"merchantReference"`
	Amount              struct {
		Value    json.Number `json:"value"`
		Currency string      `json:"currency"`
	} `json:"amount"`
	EventCode      string                     `json:"eventCode"`
	EventDate      string                     `json:"eventDate"`
	Success        flexString                 `json:"success"`
	Reason         string                     `json:"reason"`
	AdditionalData map[string]json.RawMessage `json:"additionalData"`
}

// additionalString returns a string-valued additionalData entry ("" when
// absent or not a string).
func (it *item) additionalString(key string) string {
	raw, ok := it.AdditionalData[key]
	if !ok {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// flexString accepts "true" as well as true: Adyen documents success as a
// string, and the signature is over that string form.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*f = ""
	case bytes.Equal(b, []byte("true")), bytes.Equal(b, []byte("false")):
		*f = flexString(b)
	default:
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return errors.New("expected string or boolean")
		}
		*f = flexString(s)
	}
	return nil
}
