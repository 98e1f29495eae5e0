package apiserver

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/videogen-dev/videogen-operator/internal/httpjson"
)

// checkFieldNames refuses what encoding/json forgives in a body it already decoded: a field
// name in another case ("Template_ID" fills template_id) and a key given twice (the last one
// wins), at any depth. Either way the caller meant something other than what would be stored.
func checkFieldNames(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	return scanValue(dec, jsonNames(reflect.TypeOf(v)))
}

// scanValue walks one JSON value; names, if set, are the exact keys its object may have.
func scanValue(dec *json.Decoder, names map[string]bool) error {
	tok, err := dec.Token()
	if err != nil {
		return badRequest("malformed JSON: %v", err)
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			t, err := dec.Token()
			if err != nil {
				return badRequest("malformed JSON: %v", err)
			}
			key, _ := t.(string)
			if seen[key] {
				return badRequest("field %s appears more than once", httpjson.Echo(key))
			}
			seen[key] = true
			if names != nil && !names[key] {
				return unknownField(key, names)
			}
			if err := scanValue(dec, nil); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
	case json.Delim('['):
		for dec.More() {
			if err := scanValue(dec, nil); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
	}
	if err != nil {
		return badRequest("malformed JSON: %v", err)
	}
	return nil
}

func unknownField(key string, names map[string]bool) error {
	for name := range names {
		if strings.EqualFold(name, key) {
			return badRequest("unknown field %s: field names are case-sensitive; did you mean %q?", httpjson.Echo(key), name)
		}
	}
	return badRequest("unknown field %s", httpjson.Echo(key))
}

// jsonNames lists the JSON names of a struct's fields (t may point to it); nil for other types.
func jsonNames(t reflect.Type) map[string]bool {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	names := map[string]bool{}
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch name {
		case "-":
			continue
		case "":
			name = f.Name
		}
		names[name] = true
	}
	return names
}
