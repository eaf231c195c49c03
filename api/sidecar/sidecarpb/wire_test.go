package sidecarpb

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestWireFormatIsTheSidecars checks the generated descriptors against
// testdata/wire.txt: every package, service, method, message, field
// (number, name, cardinality, type, packing, JSON name, oneof, map key and
// value), enum value and reserved range of the B&A sidecar's protos
// (release 4.9.0), so that rewording the .proto files cannot change what
// travels on the wire. GROVE_UPDATE_WIRE=1 rewrites the file, for a change
// of the sidecar's own protos only.
func TestWireFormatIsTheSidecars(t *testing.T) {
	got := describeFile(File_inference_sidecar_inference_sidecar_proto) + "\n" + describeFile(File_inference_sidecar_inference_payload_proto)
	const golden = "testdata/wire.txt"
	if os.Getenv("GROVE_UPDATE_WIRE") == "1" {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("the wire format changed:\n%s\nwant\n%s", got, want)
	}
}

// describeFile lists what of fd travels on the wire, in a stable order
// (declarations sorted by name, fields by number).
func describeFile(fd protoreflect.FileDescriptor) string {
	var b strings.Builder
	fmt.Fprintf(&b, "file %s package %s syntax %v\n", fd.Path(), fd.Package(), fd.Syntax())
	for i := range fd.Imports().Len() {
		fmt.Fprintf(&b, " import %s\n", fd.Imports().Get(i).Path())
	}
	var decls []string
	for i := range fd.Messages().Len() {
		var d strings.Builder
		describeMessage(&d, fd.Messages().Get(i))
		decls = append(decls, d.String())
	}
	for i := range fd.Enums().Len() {
		var d strings.Builder
		describeEnum(&d, fd.Enums().Get(i))
		decls = append(decls, d.String())
	}
	for i := range fd.Services().Len() {
		s := fd.Services().Get(i)
		var d strings.Builder
		fmt.Fprintf(&d, "service %s\n", s.FullName())
		for j := range s.Methods().Len() {
			m := s.Methods().Get(j)
			fmt.Fprintf(&d, "  rpc %s(%s) returns (%s) cs=%v ss=%v\n", m.Name(), m.Input().FullName(), m.Output().FullName(),
				m.IsStreamingClient(), m.IsStreamingServer())
		}
		decls = append(decls, d.String())
	}
	sort.Strings(decls)
	b.WriteString(strings.Join(decls, ""))
	return b.String()
}

func describeMessage(b *strings.Builder, m protoreflect.MessageDescriptor) {
	fmt.Fprintf(b, "message %s\n", m.FullName())
	var fields []string
	for i := range m.Fields().Len() {
		f := m.Fields().Get(i)
		typ := f.Kind().String()
		if f.Message() != nil {
			typ += " " + string(f.Message().FullName())
		}
		if f.Enum() != nil {
			typ += " " + string(f.Enum().FullName())
		}
		if f.IsMap() {
			typ += " key=" + f.MapKey().Kind().String() + " value=" + f.MapValue().Kind().String()
			if f.MapValue().Message() != nil {
				typ += " " + string(f.MapValue().Message().FullName())
			}
		}
		oneof := ""
		if o := f.ContainingOneof(); o != nil {
			oneof = " oneof " + string(o.Name())
		}
		fields = append(fields, fmt.Sprintf("  %d %s %s %s list=%v map=%v packed=%v json=%s%s\n", f.Number(), f.Name(),
			f.Cardinality(), typ, f.IsList(), f.IsMap(), f.IsPacked(), f.JSONName(), oneof))
	}
	sort.Strings(fields)
	for _, f := range fields {
		b.WriteString(f)
	}
	for i := range m.ReservedRanges().Len() {
		fmt.Fprintf(b, "  reserved %v\n", m.ReservedRanges().Get(i))
	}
	for i := range m.Enums().Len() {
		describeEnum(b, m.Enums().Get(i))
	}
	for i := range m.Messages().Len() {
		if !m.Messages().Get(i).IsMapEntry() {
			describeMessage(b, m.Messages().Get(i))
		}
	}
}

func describeEnum(b *strings.Builder, e protoreflect.EnumDescriptor) {
	fmt.Fprintf(b, "enum %s\n", e.FullName())
	for i := range e.Values().Len() {
		v := e.Values().Get(i)
		fmt.Fprintf(b, "  %s = %d\n", v.Name(), v.Number())
	}
}
