package oippb

import (
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// wireDescriptors are the descriptors of Grove's inference protos less
// what does not travel on the wire: comments (source info) and the Go
// package option.
func wireDescriptors() *descriptorpb.FileDescriptorSet {
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range []protoreflect.FileDescriptor{File_inference_model_config_proto, File_inference_grpc_service_proto} {
		p := protodesc.ToFileDescriptorProto(fd)
		p.SourceCodeInfo, p.Options = nil, nil
		set.File = append(set.File, p)
	}
	return set
}

// TestWireFormatIsTritons checks the generated descriptors against
// testdata/wire.txtpb, the descriptors of triton-inference-server/common's
// protobuf/model_config.proto and grpc_service.proto as protoc compiles
// them (docs/protobuf.md names the commit), less their comments and
// with Grove's file names: every message, field (name, number, label,
// type, JSON name, oneof), enum value, service and method, in Triton's
// order. Rewording the .proto files cannot change them unnoticed.
// GROVE_UPDATE_WIRE=1 rewrites the file, for a change of Triton's protos
// only.
func TestWireFormatIsTritons(t *testing.T) {
	got := wireDescriptors()
	const golden = "testdata/wire.txtpb"
	if os.Getenv("GROVE_UPDATE_WIRE") == "1" {
		b, err := prototext.MarshalOptions{Multiline: true}.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	want := &descriptorpb.FileDescriptorSet{}
	if err := prototext.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	if len(got.GetFile()) != len(want.GetFile()) {
		t.Fatalf("%d files, want %d", len(got.GetFile()), len(want.GetFile()))
	}
	for i, f := range got.GetFile() {
		if !proto.Equal(f, want.GetFile()[i]) {
			t.Errorf("the wire format of %s changed:\n%s\nwant\n%s", f.GetName(), prototext.Format(f), prototext.Format(want.GetFile()[i]))
		}
	}
}
