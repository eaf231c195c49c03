package deeprecpb

import (
	"os"
	"testing"

	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
)

// TestWireFormatIsDeepRecs checks the generated descriptor of
// deeprec/predict.proto against testdata/wire.txtpb, DeepRec's
// predict.proto as protoc compiles it (less its options, with Grove's file
// name): every message, field (name, number, label, type, packing, JSON
// name), map entry and enum value, in DeepRec's order. Grove's own fields
// of ServingModelInfo (numbers from 100) are checked apart. Rewording the
// .proto file cannot change the wire format unnoticed.
func TestWireFormatIsDeepRecs(t *testing.T) {
	got := protodesc.ToFileDescriptorProto(File_deeprec_predict_proto)
	got.SourceCodeInfo, got.Options = nil, nil
	var grove []*descriptorpb.FieldDescriptorProto
	for _, m := range got.GetMessageType() {
		if m.GetName() != "ServingModelInfo" {
			continue
		}
		var upstream []*descriptorpb.FieldDescriptorProto
		for _, f := range m.GetField() {
			if f.GetNumber() >= 100 {
				grove = append(grove, f)
			} else {
				upstream = append(upstream, f)
			}
		}
		m.Field = upstream
	}
	b, err := os.ReadFile("testdata/wire.txtpb")
	if err != nil {
		t.Fatal(err)
	}
	want := &descriptorpb.FileDescriptorSet{}
	if err := prototext.Unmarshal(b, want); err != nil {
		t.Fatal(err)
	}
	if len(want.GetFile()) != 1 || !proto.Equal(got, want.GetFile()[0]) {
		t.Errorf("the wire format is not DeepRec's:\n%v\nwant\n%v", prototext.Format(got), prototext.Format(want))
	}
	if len(grove) != 2 || grove[0].GetName() != "version" || grove[0].GetNumber() != 100 || grove[1].GetName() != "checksum" ||
		grove[1].GetNumber() != 101 || grove[0].GetType() != descriptorpb.FieldDescriptorProto_TYPE_STRING ||
		grove[1].GetType() != descriptorpb.FieldDescriptorProto_TYPE_STRING {
		t.Errorf("Grove's ServingModelInfo fields are %v, want string version = 100 and string checksum = 101", grove)
	}
}

// TestProcessorService pins Grove's service: grove.deeprec.v1.Processor,
// Predict(ProcessorPredictRequest{string model_path = 1;
// tensorflow.eas.PredictRequest request = 2}) returns
// tensorflow.eas.PredictResponse, unary.
func TestProcessorService(t *testing.T) {
	fd := File_grove_deeprec_v1_processor_proto
	if fd.Package() != "grove.deeprec.v1" || fd.Services().Len() != 1 {
		t.Fatalf("package %s, %d services", fd.Package(), fd.Services().Len())
	}
	s := fd.Services().Get(0)
	if s.FullName() != "grove.deeprec.v1.Processor" || s.Methods().Len() != 1 {
		t.Fatalf("service %s with %d methods", s.FullName(), s.Methods().Len())
	}
	m := s.Methods().Get(0)
	if m.Name() != "Predict" || m.IsStreamingClient() || m.IsStreamingServer() ||
		m.Output().FullName() != "tensorflow.eas.PredictResponse" {
		t.Fatalf("method %s(%s) returns %s", m.Name(), m.Input().FullName(), m.Output().FullName())
	}
	if Processor_Predict_FullMethodName != "/grove.deeprec.v1.Processor/Predict" {
		t.Errorf("full method name %s", Processor_Predict_FullMethodName)
	}
	in := m.Input().Fields()
	want := []struct {
		name string
		num  protoreflect.FieldNumber
		kind protoreflect.Kind
		msg  protoreflect.FullName
	}{{"model_path", 1, protoreflect.StringKind, ""}, {"request", 2, protoreflect.MessageKind, "tensorflow.eas.PredictRequest"}}
	if in.Len() != len(want) {
		t.Fatalf("%d fields", in.Len())
	}
	for i, w := range want {
		f := in.Get(i)
		if string(f.Name()) != w.name || f.Number() != w.num || f.Kind() != w.kind || f.Cardinality() != protoreflect.Optional ||
			(w.msg != "" && f.Message().FullName() != w.msg) {
			t.Errorf("field %d: %s = %d %v, want %s = %d %v %s", i, f.Name(), f.Number(), f.Kind(), w.name, w.num, w.kind, w.msg)
		}
	}
}
