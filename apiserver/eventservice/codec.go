package eventservice

import (
	"fmt"
	"strings"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// codecs replace connect-go's protobuf codecs, which marshal alike but fail to decode a
// request with "unmarshal into *eventsv1.HandleRequest: proto: …": a Go type a caller has
// never seen. Ours say what is wrong in the caller's terms ("request body is not valid JSON
// for HandleRequest: (line 1:14): invalid value for string field connector: 5"); the rest is
// protobuf's own text, which names proto fields only. connect-go still puts "unmarshal
// message: " in front.
func codecs() []connect.HandlerOption {
	return []connect.HandlerOption{
		connect.WithCodec(protoCodec{name: "proto"}),
		connect.WithCodec(protoCodec{name: "json", json: true}),
		connect.WithCodec(protoCodec{name: "json; charset=utf-8", json: true}),
	}
}

type protoCodec struct {
	name string
	json bool
}

func (c protoCodec) Name() string { return c.name }

func (c protoCodec) Marshal(v any) ([]byte, error) { return c.MarshalAppend(nil, v) }

// MarshalAppend lets connect-go reuse its buffers, as with its own codecs.
func (c protoCodec) MarshalAppend(dst []byte, v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("eventservice: %T is not a protobuf message", v)
	}
	if c.json {
		return protojson.MarshalOptions{}.MarshalAppend(dst, m)
	}
	return proto.MarshalOptions{}.MarshalAppend(dst, m)
}

func (c protoCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("eventservice: %T is not a protobuf message", v)
	}
	name := m.ProtoReflect().Descriptor().Name()
	if !c.json {
		if err := proto.Unmarshal(data, m); err != nil {
			return fmt.Errorf("request body is not a valid binary protobuf %s: %s", name, protoText(err))
		}
		return nil
	}
	if len(data) == 0 {
		return fmt.Errorf("request body is empty: send a JSON %s object", name)
	}
	// Unknown fields are ignored, as by connect-go's codec, so that callers built from a newer
	// proto keep working.
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, m); err != nil {
		return fmt.Errorf("request body is not valid JSON for %s: %s", name, protoText(err))
	}
	return nil
}

// protoText is a protobuf error without its "proto:" prefix (followed by a space or, in some
// builds, a no-break space: protobuf varies it so that nobody parses its messages).
func protoText(err error) string {
	msg := err.Error()
	for _, prefix := range []string{"proto: ", "proto:\u00a0"} {
		if rest, ok := strings.CutPrefix(msg, prefix); ok {
			return rest
		}
	}
	return msg
}
