package connectors

import (
	"encoding/json"
	"errors"
	"reflect"
)

// ErrUnknownConnector is wrapped by the error Lookup and Handle return for a
// connector name that is not registered.
var ErrUnknownConnector = errors.New("unknown connector")

// AuthError means the webhook could not be authenticated: missing or
// malformed signature header, timestamp outside tolerance, no matching
// signature, or no secret configured. The RPC layer maps it to
// Unauthenticated.
type AuthError struct {
	Connector string
	Reason    string
}

// The messages of AuthError and ParseError are answered to the sender of the webhook as they are:
// they name the connector and what was wrong, not this package.
func (e *AuthError) Error() string {
	return e.Connector + " webhook not authenticated: " + e.Reason
}

// ParseError means the body could not be parsed into an event. The RPC layer
// maps it to InvalidArgument.
type ParseError struct {
	Connector string
	Err       error
}

func (e *ParseError) Error() string {
	msg := "cannot parse the " + e.Connector + " webhook body"
	if e.Err != nil {
		msg += ": " + describe(e.Err)
	}
	return msg
}

// describe is err's text for the sender of the body. encoding/json's type errors name the
// connector's Go types ("cannot unmarshal string into Go struct field object.data.object.amount
// of type int64"), which mean nothing to a processor and expose internals: they are said in
// JSON's terms instead.
func describe(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	want := "a value of another type"
	if te.Type != nil {
		switch te.Type.Kind() {
		case reflect.Struct, reflect.Map:
			want = "an object"
		case reflect.Slice, reflect.Array:
			want = "an array"
		case reflect.String:
			want = "a string"
		case reflect.Bool:
			want = "a boolean"
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
			reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
			want = "an integer"
		case reflect.Float32, reflect.Float64:
			want = "a number"
		}
	}
	where := "the body"
	if te.Field != "" {
		where = "field " + te.Field
	}
	return where + " is a JSON " + te.Value + ", want " + want
}

func (e *ParseError) Unwrap() error { return e.Err }
