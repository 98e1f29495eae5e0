// Package norm converts processor values (amounts, currencies, times) into
// the shared model's units.
package norm

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Currency returns the ISO 4217 code in upper case.
func Currency(code string) string { return strings.ToUpper(strings.TrimSpace(code)) }

// ErrBadAmount is returned for amounts that are not exact decimals in range.
var ErrBadAmount = errors.New("amount is not a decimal with at most the currency's minor digits")

// DecimalToMinor converts a decimal major-unit amount such as "300.00" or
// "1.1" into minor units with the given number of minor digits, exactly
// (no floating point). More significant decimals than digits is an error
// rather than a silent rounding.
func DecimalToMinor(s string, digits int) (int64, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || !allDigits(whole) || !allDigits(frac) || len(whole) > 15 {
		return 0, ErrBadAmount
	}
	frac = strings.TrimRight(frac, "0")
	if len(frac) > digits {
		return 0, ErrBadAmount
	}
	frac += strings.Repeat("0", digits-len(frac))
	n, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, ErrBadAmount
	}
	if neg {
		n = -n
	}
	return n, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Unix converts epoch seconds, treating 0 as "absent". A time outside years
// 1..9999 is absent too (see representable).
func Unix(sec int64) time.Time {
	if sec == 0 {
		return time.Time{}
	}
	return representable(time.Unix(sec, 0).UTC())
}

// Time parses RFC 3339 (any fractional precision), falling back to the
// zone-less form some processors send, read as UTC. Unparseable input, and a
// time outside years 1..9999 in UTC, yields the zero time: a bad timestamp
// should not reject a verified event.
func Time(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return representable(t.UTC())
	}
	if t, err := time.Parse("2006-01-02T15:04:05.999999999", s); err == nil {
		return representable(t.UTC())
	}
	return time.Time{}
}

// representable returns t (in UTC) when every consumer of an event can carry
// it, else the zero time. Outside years 1..9999 a protobuf Timestamp does not
// marshal (the Event Service would fail with Internal) and a PaymentEvent's
// date-time does not validate (the kube-apiserver rejects it, so the ingress
// could never store the event): the time is unknown rather than the event lost.
func representable(t time.Time) time.Time {
	if y := t.Year(); y < 1 || y > 9999 {
		return time.Time{}
	}
	return t
}
