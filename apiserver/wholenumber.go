package apiserver

import (
	"encoding/json"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// wholeNumber is an int32 request field that takes any JSON number of integer value, 5.0 and
// 5e0 as well as 5: the OpenAPI document (3.1, JSON Schema 2020-12) calls such a field an
// integer, and "integer" there is any number without a fractional part. Clients whose
// languages write whole floats with a point (Python's json.dumps(10.0) is "10.0") would
// otherwise be refused a value the schema allows.
type wholeNumber int32

func (n *wholeNumber) UnmarshalJSON(b []byte) error {
	refused := &json.UnmarshalTypeError{Type: reflect.TypeFor[int32]()}
	switch {
	case len(b) == 0:
		refused.Value = "number"
		return refused
	case b[0] == '"':
		refused.Value = "string"
		return refused
	case b[0] == 't' || b[0] == 'f':
		refused.Value = "bool"
		return refused
	case b[0] == '[':
		refused.Value = "array"
		return refused
	case b[0] == '{':
		refused.Value = "object"
		return refused
	}
	// A JSON number (the decoder has checked its syntax), read exactly: no float64 rounding,
	// so 5.0000000000000000001 is no integer. A big.Rat would build 1e999999999 in full: an
	// exponent beyond any int32's digits decides without it.
	literal := string(b)
	mantissa, exponent, hasExponent := strings.Cut(strings.ToLower(literal), "e")
	zero := strings.Trim(mantissa, "-+0.") == ""
	if e, err := strconv.Atoi(exponent); hasExponent && !zero && (err != nil || e > 64 || e < -64-len(mantissa)) {
		if strings.HasPrefix(exponent, "-") {
			refused.Value = "number " + literal // a fraction: 5e-999
		} else {
			refused.Value = "number " + strings.TrimLeft(mantissa, "-+") + strings.Repeat("0", 40) // far out of range
		}
		return refused
	}
	r, ok := new(big.Rat).SetString(literal)
	if !ok || !r.IsInt() {
		refused.Value = "number " + literal
		return refused
	}
	whole := r.Num()
	if !whole.IsInt64() || whole.Int64() < math.MinInt32 || whole.Int64() > math.MaxInt32 {
		// Said as the integer it is, so that the answer reads "out of range", not "an integer".
		refused.Value = "number " + whole.String()
		return refused
	}
	i := whole.Int64()
	*n = wholeNumber(i)
	return nil
}

// int32s is the value of an optional field, as the API's types keep it.
func (n *wholeNumber) int32s() *int32 {
	if n == nil {
		return nil
	}
	v := int32(*n)
	return &v
}
