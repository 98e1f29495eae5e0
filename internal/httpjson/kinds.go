package httpjson

import "reflect"

// KindName names a Go kind as a JSON type, for telling a client which type a field wants
// ("field duration must be a number, not a string") without Go's names for it.
func KindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Float32, reflect.Float64, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	}
	return "of another type"
}
