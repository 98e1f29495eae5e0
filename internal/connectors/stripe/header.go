package stripe

import (
	"encoding/hex"
	"strconv"
	"strings"
)

type signatureHeader struct {
	timestamp int64
	v1        [][]byte
}

// parseHeader reads "t=...,v1=...,v1=...,v0=...". It returns a reason when
// the header is unusable. Undecodable v1 values are skipped, as stripe-go
// does, so one garbled entry cannot hide a valid one.
func parseHeader(raw string) (signatureHeader, string) {
	var h signatureHeader
	haveT := false
	for _, item := range strings.Split(raw, ",") {
		key, value, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			return h, "item without '='"
		}
		switch key {
		case "t":
			ts, err := strconv.ParseInt(value, 10, 64)
			if err != nil || ts <= 0 {
				return h, "timestamp is not a positive integer"
			}
			h.timestamp, haveT = ts, true
		case "v1":
			if b, err := hex.DecodeString(value); err == nil {
				h.v1 = append(h.v1, b)
			}
		}
	}
	if !haveT {
		return h, "no t= timestamp"
	}
	if len(h.v1) == 0 {
		return h, "no decodable v1 signature"
	}
	return h, ""
}
