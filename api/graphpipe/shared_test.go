package graphpipe

import (
	"errors"
	"runtime"
	"testing"

	fb "github.com/google/flatbuffers/go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"
)

// sharedRequest serialises an InferRequest whose input_tensors vector
// holds tensors copies of one tensor table, which tensor builds: a
// flatbuffer may point any number of offsets at the same object.
func sharedRequest(tensors int, tensor func(*fb.Builder) fb.UOffsetT) []byte {
	b := fb.NewBuilder(1024)
	t := tensor(b)
	gpfb.InferRequestStartInputTensorsVector(b, tensors)
	for range tensors {
		b.PrependUOffsetT(t)
	}
	return finishRequest(b, b.EndVector(tensors), 0)
}

// finishRequest ends b with an InferRequest of the input tensors vector
// tensors and, when not 0, the output names vector outputNames, and
// returns its bytes.
func finishRequest(b *fb.Builder, tensors, outputNames fb.UOffsetT) []byte {
	gpfb.InferRequestStart(b)
	gpfb.InferRequestAddInputTensors(b, tensors)
	if outputNames != 0 {
		gpfb.InferRequestAddOutputNames(b, outputNames)
	}
	ir := gpfb.InferRequestEnd(b)
	gpfb.RequestStart(b)
	gpfb.RequestAddReqType(b, gpfb.ReqInferRequest)
	gpfb.RequestAddReq(b, ir)
	b.Finish(gpfb.RequestEnd(b))
	return b.FinishedBytes()
}

// allocatedBy is how many bytes f allocates.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestSharedFlatbufferObjectsCannotMakeASmallBodyAllocateALot(t *testing.T) {
	const size = 64 << 10 // bytes of data, or of the one string
	float32s := func(b *fb.Builder) fb.UOffsetT {
		data := b.CreateByteVector(make([]byte, size))
		gpfb.TensorStartShapeVector(b, 1)
		b.PrependInt64(size / 4)
		shape := b.EndVector(1)
		gpfb.TensorStart(b)
		gpfb.TensorAddType(b, gpfb.TypeFloat32)
		gpfb.TensorAddShape(b, shape)
		gpfb.TensorAddData(b, data)
		return gpfb.TensorEnd(b)
	}
	const elems = 1024
	strings := func(b *fb.Builder) fb.UOffsetT {
		s := b.CreateByteVector(make([]byte, size))
		gpfb.TensorStartStringValVector(b, elems)
		for range elems {
			b.PrependUOffsetT(s) // every element is the same string
		}
		vals := b.EndVector(elems)
		gpfb.TensorStartShapeVector(b, 1)
		b.PrependInt64(elems)
		shape := b.EndVector(1)
		gpfb.TensorStart(b)
		gpfb.TensorAddType(b, gpfb.TypeString)
		gpfb.TensorAddShape(b, shape)
		gpfb.TensorAddStringVal(b, vals)
		return gpfb.TensorEnd(b)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"one data tensor 1024 times", sharedRequest(MaxTensors, float32s)},
		{"one string 1024 times", sharedRequest(1, strings)},
	} {
		var err error
		n := allocatedBy(func() { _, err = ParseRequest(c.body) })
		if limit := uint64(8*len(c.body) + 1<<20); n > limit {
			t.Errorf("%s: a %d-byte body allocated %d bytes (more than %d)", c.name, len(c.body), n, limit)
		}
		if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want an ErrMalformed error", c.name, err)
		}
	}
}

func TestSharedNamesCannotMakeASmallBodyAllocateALot(t *testing.T) {
	b := fb.NewBuilder(1024)
	name := b.CreateString(string(make([]byte, 64<<10)))
	gpfb.InferRequestStartOutputNamesVector(b, MaxTensors)
	for range MaxTensors {
		b.PrependUOffsetT(name) // every output name is the same string
	}
	names := b.EndVector(MaxTensors)
	data := b.CreateByteVector(make([]byte, 4))
	gpfb.TensorStartShapeVector(b, 1)
	b.PrependInt64(1)
	shape := b.EndVector(1)
	gpfb.TensorStart(b)
	gpfb.TensorAddType(b, gpfb.TypeFloat32)
	gpfb.TensorAddShape(b, shape)
	gpfb.TensorAddData(b, data)
	tensor := gpfb.TensorEnd(b)
	gpfb.InferRequestStartInputTensorsVector(b, 1)
	b.PrependUOffsetT(tensor)
	body := finishRequest(b, b.EndVector(1), names)
	var err error
	n := allocatedBy(func() { _, err = ParseRequest(body) })
	if limit := uint64(8*len(body) + 1<<20); n > limit {
		t.Errorf("a %d-byte body allocated %d bytes (more than %d)", len(body), n, limit)
	}
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("%v, want an ErrMalformed error (allocated %d for %d)", err, n, len(body))
	}
}
