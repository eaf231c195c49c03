// Package graphpipe is Oracle GraphPipe over Grove's contracts: POST
// /{org}/{project}/{n}/gp (Register), with its HTTP status for a kind of
// failure (statusOf: ForestFlow's table), and the codec between GraphPipe
// flatbuffer messages and Grove tensors, which does no I/O. The codec
// reads the Request a GraphPipe client POSTs (an InferRequest or a
// MetadataRequest) and writes the InferResponse and MetadataResponse it
// gets back, using the flatbuffer code generated from graphpipe.fbs that
// ships with github.com/oracle/graphpipe-go (package graphpipefb).
//
// # Requests
//
// ParseRequest accepts untrusted bytes. Flatbuffer accessors index straight
// into the buffer, so a malformed message can make them panic; ParseRequest
// recovers and returns an error wrapping ErrMalformed. Before anything is
// allocated from a length read out of the message, that length is checked
// against the size of the body, so a small body cannot ask for a large
// allocation; nor can objects the message shares between several tensors,
// string elements or names (the input tensors take at most twice the
// body's size, the names at most its size). Every input tensor is checked: its type must map to a Grove
// dtype, its shape must pass servables.NumElements (every dimension ≥ 1, at
// most servables.MaxElements elements, at most MaxRank dimensions) and its
// data must hold exactly that many elements. An empty shape is a scalar of
// one element, as in Grove.
//
// Type mapping (GraphPipe → Grove): Float16 → Float16, Float32 → Float32,
// Float64 → Float64, Int8 → Int8, Int16 → Int16, Int32 → Int32, Int64 →
// Int64, and String → Bytes: a String tensor's elements are its string_val
// entries (any bytes), one per element of the shape, and its data must be
// empty. The unsigned types are widened losslessly: Uint8 → Int16, Uint16
// → Int32, Uint32 → Int64. Uint64 and Null have no lossless Grove dtype
// and are errors wrapping ErrUnsupportedType.
//
// GraphPipe sends tensor data little-endian; Grove tensors hold host byte
// order. The codec converts (a plain copy on little-endian hosts).
//
// # Responses
//
// GraphPipe tensors carry no name: the outputs of an InferResponse are
// matched to the request's output_names by position, so AppendInferResponse
// writes outputs in the order given and ignores Tensor.Name. Output dtypes
// map back one to one (Grove Float32 → GraphPipe Float32, ..., Bytes →
// String, its elements in string_val). A scalar
// (empty shape) is written as such; graphpipe-go's client cannot decode one
// (it counts an empty shape as zero elements), so give it shape [1] instead.
//
// GraphPipe reports failures inside an InferResponse (its errors list, see
// AppendErrorResponse), which is what ForestFlow does, with HTTP 200. Note
// that graphpipe-go v1.0.0's client ignores that list: MultiRemote returns
// no outputs and no error, and Remote panics (it indexes the empty result).
// graphpipe-go's own server answers a failed request with a non-200 status
// and a text body instead, which MultiRemote turns into an error (Remote
// still panics, on any error). See the package tests.
package graphpipe

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	fb "github.com/google/flatbuffers/go"
	gpfb "github.com/oracle/graphpipe-go/graphpipefb"

	"github.com/groveml/grove/servables"
)

// Kind tells which message a Request holds.
type Kind uint8

// The two GraphPipe request kinds.
const (
	// KindInfer is an InferRequest: run the model on the input tensors.
	KindInfer Kind = 1
	// KindMetadata is a MetadataRequest: describe the model's inputs and outputs.
	KindMetadata Kind = 2
)

// String returns "infer" or "metadata".
func (k Kind) String() string {
	switch k {
	case KindInfer:
		return "infer"
	case KindMetadata:
		return "metadata"
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// Limits on what one request may hold.
const (
	// MaxTensors bounds the number of input tensors, input names and output
	// names of one InferRequest.
	MaxTensors = 1024
	// MaxRank bounds the number of dimensions of one tensor.
	MaxRank = 32
)

// Errors returned by ParseRequest; each error wraps one of them or
// servables.ErrShape.
var (
	// ErrMalformed marks a body that is not a well-formed GraphPipe Request.
	ErrMalformed = errors.New("malformed GraphPipe request")
	// ErrUnsupportedType marks a tensor whose GraphPipe type has no Grove dtype.
	ErrUnsupportedType = errors.New("unsupported GraphPipe tensor type")
)

// Request is a parsed GraphPipe Request. For Kind == KindMetadata every other
// field is empty.
type Request struct {
	Kind Kind
	// Config is InferRequest.config, free-form (ForestFlow reads k:v,k2:v2
	// pairs from it for its logging key).
	Config string
	// InputNames are the names the client gave, in order; there may be fewer
	// names than Inputs (the server picks defaults for the rest), never more.
	InputNames []string
	// Inputs are the input tensors in request order, each validated, 8-byte
	// aligned, in host byte order; Inputs[i].Name is InputNames[i] when given.
	Inputs []servables.Tensor
	// OutputNames are the requested outputs in order, possibly none (the
	// server then returns its default outputs); none is empty.
	OutputNames []string
}

// ParseRequest decodes a GraphPipe Request flatbuffer. It never panics: any
// inconsistency in body, including one that makes a flatbuffer accessor
// panic, comes back as an error. The returned Request does not share memory
// with body.
func ParseRequest(body []byte) (req Request, err error) {
	defer func() {
		if r := recover(); r != nil {
			req, err = Request{}, fmt.Errorf("%w: %v", ErrMalformed, r)
		}
	}()
	if len(body) < 8 {
		return Request{}, fmt.Errorf("%w: %d bytes is too short for a flatbuffer", ErrMalformed, len(body))
	}
	if uint64(len(body)) > 1<<31 {
		return Request{}, fmt.Errorf("%w: %d bytes is more than a flatbuffer can address", ErrMalformed, len(body))
	}
	root := gpfb.GetRootAsRequest(body, 0)
	switch root.ReqType() {
	case gpfb.ReqMetadataRequest:
		return Request{Kind: KindMetadata}, nil
	case gpfb.ReqInferRequest:
	case gpfb.ReqNONE:
		return Request{}, fmt.Errorf("%w: the request holds neither an InferRequest nor a MetadataRequest", ErrMalformed)
	default:
		return Request{}, fmt.Errorf("%w: unknown request type %d", ErrMalformed, root.ReqType())
	}
	var tab fb.Table
	if !root.Req(&tab) {
		return Request{}, fmt.Errorf("%w: InferRequest type without an InferRequest table", ErrMalformed)
	}
	var ir gpfb.InferRequest
	ir.Init(tab.Bytes, tab.Pos)
	return parseInfer(&ir, len(body))
}

// checkLen checks that a vector of n elements of size bytes each could fit in
// a body of bodyLen bytes, and that n is within max.
func checkLen(what string, n, size, max, bodyLen int) error {
	if n < 0 || n > max || n*size > bodyLen {
		return fmt.Errorf("%w: %d %s", ErrMalformed, n, what)
	}
	return nil
}

func parseInfer(ir *gpfb.InferRequest, bodyLen int) (Request, error) {
	req := Request{Kind: KindInfer, Config: string(ir.Config())}

	nt := ir.InputTensorsLength()
	if err := checkLen("input tensors", nt, 4, MaxTensors, bodyLen); err != nil {
		return Request{}, err
	}
	if nt == 0 {
		return Request{}, fmt.Errorf("%w: the InferRequest has no input tensors", ErrMalformed)
	}
	nn := ir.InputNamesLength()
	if err := checkLen("input names", nn, 4, nt, bodyLen); err != nil {
		return Request{}, fmt.Errorf("%w (for %d input tensors)", err, nt)
	}
	// The names, like the tensors (see budget), take no more than the
	// body carries, however many of them point at one string.
	nameBytes := bodyLen
	seen := make(map[string]bool, nn)
	for i := 0; i < nn; i++ {
		b := ir.InputNames(i)
		if nameBytes -= len(b); nameBytes < 0 {
			return Request{}, fmt.Errorf("%w: the input names hold more bytes than a %d-byte body carries (a string shared by several names)", ErrMalformed, bodyLen)
		}
		name := string(b)
		if name != "" && seen[name] {
			return Request{}, fmt.Errorf("%w: input name %q given twice", ErrMalformed, name)
		}
		seen[name] = true
		req.InputNames = append(req.InputNames, name)
	}
	no := ir.OutputNamesLength()
	if err := checkLen("output names", no, 4, MaxTensors, bodyLen); err != nil {
		return Request{}, err
	}
	for i := 0; i < no; i++ {
		b := ir.OutputNames(i)
		if nameBytes -= len(b); nameBytes < 0 {
			return Request{}, fmt.Errorf("%w: the output names hold more bytes than a %d-byte body carries (a string shared by several names)", ErrMalformed, bodyLen)
		}
		name := string(b)
		if name == "" {
			return Request{}, fmt.Errorf("%w: output name %d is empty", ErrMalformed, i)
		}
		req.OutputNames = append(req.OutputNames, name)
	}

	req.Inputs = make([]servables.Tensor, nt)
	// What the tensors take in Grove is at most twice what they take in
	// an unshared message (widened unsigned types double; a string
	// element's 4-byte length stands for its offset and its own length
	// prefix), but a flatbuffer may point many offsets at one object: the
	// budget keeps a small body from asking for more.
	budget := 2 * bodyLen
	var t gpfb.Tensor
	for i := range nt {
		if !ir.InputTensors(&t, i) {
			return Request{}, fmt.Errorf("%w: input tensor %d is missing", ErrMalformed, i)
		}
		name := ""
		if i < nn {
			name = req.InputNames[i]
		}
		in, err := parseTensor(&t, name, bodyLen, &budget)
		if err != nil {
			return Request{}, fmt.Errorf("input tensor %d: %w", i, err)
		}
		req.Inputs[i] = in
	}
	return req, nil
}

// wire describes how a GraphPipe type is read into a Grove dtype.
type wire struct {
	dt   servables.DType
	size int // bytes per element on the wire
}

var wireTypes = map[byte]wire{
	gpfb.TypeFloat32: {servables.Float32, 4},
	gpfb.TypeFloat64: {servables.Float64, 8},
	gpfb.TypeInt8:    {servables.Int8, 1},
	gpfb.TypeInt16:   {servables.Int16, 2},
	gpfb.TypeInt32:   {servables.Int32, 4},
	gpfb.TypeInt64:   {servables.Int64, 8},
	gpfb.TypeUint8:   {servables.Int16, 1},
	gpfb.TypeUint16:  {servables.Int32, 2},
	gpfb.TypeUint32:  {servables.Int64, 4},
	gpfb.TypeFloat16: {servables.Float16, 2},
}

// typeName names a GraphPipe type for error messages.
func typeName(t byte) string {
	if n, ok := gpfb.EnumNamesType[int(t)]; ok {
		return n
	}
	return fmt.Sprintf("type %d", t)
}

func parseTensor(t *gpfb.Tensor, name string, bodyLen int, budget *int) (servables.Tensor, error) {
	if t.Type() == gpfb.TypeString {
		return parseStrings(t, name, bodyLen, budget)
	}
	w, ok := wireTypes[t.Type()]
	if !ok {
		return servables.Tensor{}, fmt.Errorf("%w: %s has no Grove dtype (supported: Float16, Float32, Float64, Int8, Int16, Int32, Int64, String, and Uint8, Uint16, Uint32 widened to Int16, Int32, Int64)", ErrUnsupportedType, typeName(t.Type()))
	}
	shape, n, err := parseShape(t, bodyLen)
	if err != nil {
		return servables.Tensor{}, err
	}
	if t.StringValLength() != 0 {
		return servables.Tensor{}, fmt.Errorf("%w: a %s tensor carries string_val", ErrMalformed, typeName(t.Type()))
	}
	data := t.DataBytes()
	if len(data) != n*w.size {
		return servables.Tensor{}, fmt.Errorf("%w: %d bytes of %s do not fill shape %v (%d elements of %d bytes)", servables.ErrShape, len(data), typeName(t.Type()), shape, n, w.size)
	}
	if err := spend(budget, n*w.dt.Size(), bodyLen); err != nil {
		return servables.Tensor{}, err
	}
	out, err := servables.NewTensor(name, w.dt, shape)
	if err != nil {
		return servables.Tensor{}, err
	}
	fromWire(out.Data, data, w.size, w.dt.Size(), t.Type())
	return out, nil
}

// parseStrings reads a String tensor: one string_val entry per element.
func parseStrings(t *gpfb.Tensor, name string, bodyLen int, budget *int) (servables.Tensor, error) {
	shape, n, err := parseShape(t, bodyLen)
	if err != nil {
		return servables.Tensor{}, err
	}
	if t.DataLength() != 0 {
		return servables.Tensor{}, fmt.Errorf("%w: a String tensor carries %d bytes of data; its elements belong in string_val", ErrMalformed, t.DataLength())
	}
	ns := t.StringValLength()
	if err := checkLen("string_val entries", ns, 4, servables.MaxElements, bodyLen); err != nil {
		return servables.Tensor{}, err
	}
	if ns != n {
		return servables.Tensor{}, fmt.Errorf("%w: %d string_val entries do not fill shape %v (%d elements)", servables.ErrShape, ns, shape, n)
	}
	size := 0
	for i := range ns {
		if size += servables.BytesLenSize + len(t.StringVal(i)); size > *budget {
			break
		}
	}
	if err := spend(budget, size, bodyLen); err != nil {
		return servables.Tensor{}, err
	}
	data := make([]byte, 0, size)
	for i := range ns {
		data = servables.AppendBytesElement(data, t.StringVal(i))
	}
	return servables.Tensor{Name: name, DType: servables.Bytes, Shape: shape, Data: data}, nil
}

// spend takes size bytes of tensor memory from the request's budget, or
// fails when the tensors would take more than a body of bodyLen bytes can
// carry.
func spend(budget *int, size, bodyLen int) error {
	if size > *budget {
		return fmt.Errorf("%w: the input tensors hold more data than a %d-byte body carries (objects shared by several tensors or elements)", ErrMalformed, bodyLen)
	}
	*budget -= size
	return nil
}

// parseShape reads a tensor's shape, its length checked against the body,
// and its element count (servables.NumElements).
func parseShape(t *gpfb.Tensor, bodyLen int) ([]int64, int, error) {
	rank := t.ShapeLength()
	if err := checkLen("dimensions", rank, 8, MaxRank, bodyLen); err != nil {
		return nil, 0, err
	}
	shape := make([]int64, rank)
	for i := range shape {
		shape[i] = t.Shape(i)
	}
	n, err := servables.NumElements(shape)
	return shape, n, err
}

// hostLittle is true on little-endian hosts, where GraphPipe's wire order
// and Grove's host order agree.
var hostLittle = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// fromWire converts little-endian elements of inSize bytes into host-order
// elements of outSize bytes (outSize > inSize only for the widened unsigned
// types, which are zero-extended).
func fromWire(dst, src []byte, inSize, outSize int, typ byte) {
	if inSize == outSize {
		if hostLittle || inSize == 1 {
			copy(dst, src)
			return
		}
		swapCopy(dst, src, inSize)
		return
	}
	n := len(src) / inSize
	ne := binary.NativeEndian
	switch typ {
	case gpfb.TypeUint8:
		for i := range n {
			ne.PutUint16(dst[2*i:], uint16(src[i]))
		}
	case gpfb.TypeUint16:
		for i := range n {
			ne.PutUint32(dst[4*i:], uint32(binary.LittleEndian.Uint16(src[2*i:])))
		}
	case gpfb.TypeUint32:
		for i := range n {
			ne.PutUint64(dst[8*i:], uint64(binary.LittleEndian.Uint32(src[4*i:])))
		}
	}
}

// swapCopy copies elements of size bytes, reversing each element's bytes.
func swapCopy(dst, src []byte, size int) {
	for i := 0; i+size <= len(src); i += size {
		for j := range size {
			dst[i+j] = src[i+size-1-j]
		}
	}
}

var builders = sync.Pool{New: func() any { return fb.NewBuilder(4096) }}

// maxPooledBuilder is the largest builder buffer kept for reuse; a builder
// that grew past it for one large response is left to the collector.
const maxPooledBuilder = 1 << 20

func getBuilder() *fb.Builder {
	b := builders.Get().(*fb.Builder)
	b.Reset()
	return b
}

// finish ends the message, appends it to dst and recycles b.
func finish(dst []byte, b *fb.Builder, root fb.UOffsetT) []byte {
	b.Finish(root)
	dst = append(dst, b.FinishedBytes()...)
	if cap(b.Bytes) <= maxPooledBuilder {
		builders.Put(b)
	}
	return dst
}

var toWireTypes = map[servables.DType]byte{
	servables.Float32: gpfb.TypeFloat32,
	servables.Float64: gpfb.TypeFloat64,
	servables.Int8:    gpfb.TypeInt8,
	servables.Int16:   gpfb.TypeInt16,
	servables.Int32:   gpfb.TypeInt32,
	servables.Int64:   gpfb.TypeInt64,
	servables.Uint8:   gpfb.TypeUint8,
	servables.Bool:    gpfb.TypeUint8, // GraphPipe has no bool type: bytes 0 and 1
	servables.Bytes:   gpfb.TypeString,
	servables.Float16: gpfb.TypeFloat16,
}

// OutputErrorCode is the Error.code AppendInferResponse writes when an
// output tensor is invalid.
const OutputErrorCode = 500

// AppendInferResponse appends to dst a GraphPipe InferResponse flatbuffer
// holding outputs, in order, and returns the extended slice. Tensor names are
// not written (GraphPipe matches outputs to output_names by position). If an
// output fails servables.Tensor.Validate, it appends instead an error
// response with code OutputErrorCode naming the bad output.
func AppendInferResponse(dst []byte, outputs []servables.Tensor) []byte {
	if err := checkOutputs(outputs); err != nil {
		return AppendErrorResponse(dst, OutputErrorCode, err.Error())
	}
	b := getBuilder()
	offs := make([]fb.UOffsetT, len(outputs))
	var swapped []byte
	for i, t := range outputs {
		if t.DType == servables.Bytes {
			offs[i] = stringTensor(b, t)
			continue
		}
		data := t.Data
		if !hostLittle && t.DType.Size() > 1 {
			swapped = append(swapped[:0], data...)
			swapCopy(swapped, data, t.DType.Size())
			data = swapped
		}
		dataOff := b.CreateByteVector(data)
		gpfb.TensorStartShapeVector(b, len(t.Shape))
		for j := len(t.Shape) - 1; j >= 0; j-- {
			b.PrependInt64(t.Shape[j])
		}
		shapeOff := b.EndVector(len(t.Shape))
		gpfb.TensorStart(b)
		gpfb.TensorAddType(b, toWireTypes[t.DType])
		gpfb.TensorAddShape(b, shapeOff)
		gpfb.TensorAddData(b, dataOff)
		offs[i] = gpfb.TensorEnd(b)
	}
	gpfb.InferResponseStartOutputTensorsVector(b, len(offs))
	for i := len(offs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(offs[i])
	}
	vec := b.EndVector(len(offs))
	gpfb.InferResponseStart(b)
	gpfb.InferResponseAddOutputTensors(b, vec)
	return finish(dst, b, gpfb.InferResponseEnd(b))
}

// checkOutputs reports the first output AppendInferResponse cannot write:
// an invalid tensor, or a dtype GraphPipe has no type for.
func checkOutputs(outputs []servables.Tensor) error {
	for i, t := range outputs {
		if err := t.Validate(); err != nil {
			return fmt.Errorf("output %d (%q): %w", i, t.Name, err)
		}
		if _, ok := toWireTypes[t.DType]; !ok {
			return fmt.Errorf("output %d (%q) is %v, which GraphPipe has no type for", i, t.Name, t.DType)
		}
	}
	return nil
}

// stringTensor writes a valid Bytes tensor as a GraphPipe String tensor,
// its elements in string_val (byte vectors, as graphpipe-go writes them).
func stringTensor(b *fb.Builder, t servables.Tensor) fb.UOffsetT {
	var strs []fb.UOffsetT
	for data := t.Data; len(data) > 0; {
		e, rest, _ := servables.NextBytesElement(data)
		strs = append(strs, b.CreateByteVector(e))
		data = rest
	}
	gpfb.TensorStartStringValVector(b, len(strs))
	for i := len(strs) - 1; i >= 0; i-- {
		b.PrependUOffsetT(strs[i])
	}
	vals := b.EndVector(len(strs))
	gpfb.TensorStartShapeVector(b, len(t.Shape))
	for j := len(t.Shape) - 1; j >= 0; j-- {
		b.PrependInt64(t.Shape[j])
	}
	shapeOff := b.EndVector(len(t.Shape))
	gpfb.TensorStart(b)
	gpfb.TensorAddType(b, gpfb.TypeString)
	gpfb.TensorAddShape(b, shapeOff)
	gpfb.TensorAddStringVal(b, vals)
	return gpfb.TensorEnd(b)
}

// AppendErrorResponse appends to dst a GraphPipe InferResponse flatbuffer with
// no output tensors and one Error{code, msg}, and returns the extended slice.
// GraphPipe leaves codes to the server; Grove uses HTTP status codes.
func AppendErrorResponse(dst []byte, code int64, msg string) []byte {
	b := getBuilder()
	msgOff := b.CreateString(msg)
	gpfb.ErrorStart(b)
	gpfb.ErrorAddCode(b, code)
	gpfb.ErrorAddMessage(b, msgOff)
	errOff := gpfb.ErrorEnd(b)
	gpfb.InferResponseStartErrorsVector(b, 1)
	b.PrependUOffsetT(errOff)
	errs := b.EndVector(1)
	gpfb.InferResponseStartOutputTensorsVector(b, 0)
	outs := b.EndVector(0)
	gpfb.InferResponseStart(b)
	gpfb.InferResponseAddOutputTensors(b, outs)
	gpfb.InferResponseAddErrors(b, errs)
	return finish(dst, b, gpfb.InferResponseEnd(b))
}

// IO describes one model input or output in a MetadataResponse. Shape may use
// -1 for a dimension of any size (GraphPipe's convention, typically the batch
// dimension). Type Unknown is written as GraphPipe's Null type.
type IO struct {
	Name        string
	Description string
	Type        servables.DType
	Shape       []int64
}

// Metadata is the content of a GraphPipe MetadataResponse.
type Metadata struct {
	Name        string
	Version     string
	Server      string
	Description string
	Inputs      []IO
	Outputs     []IO
}

// AppendMetadataResponse appends to dst a GraphPipe MetadataResponse
// flatbuffer describing m, and returns the extended slice.
func AppendMetadataResponse(dst []byte, m Metadata) []byte {
	b := getBuilder()
	ios := func(list []IO, startVector func(*fb.Builder, int) fb.UOffsetT) fb.UOffsetT {
		offs := make([]fb.UOffsetT, len(list))
		for i, io := range list {
			gpfb.IOMetadataStartShapeVector(b, len(io.Shape))
			for j := len(io.Shape) - 1; j >= 0; j-- {
				b.PrependInt64(io.Shape[j])
			}
			shape := b.EndVector(len(io.Shape))
			name := b.CreateString(io.Name)
			desc := b.CreateString(io.Description)
			gpfb.IOMetadataStart(b)
			gpfb.IOMetadataAddName(b, name)
			gpfb.IOMetadataAddDescription(b, desc)
			gpfb.IOMetadataAddShape(b, shape)
			gpfb.IOMetadataAddType(b, toWireTypes[io.Type]) // Unknown → 0 (Null)
			offs[i] = gpfb.IOMetadataEnd(b)
		}
		startVector(b, len(offs))
		for i := len(offs) - 1; i >= 0; i-- {
			b.PrependUOffsetT(offs[i])
		}
		return b.EndVector(len(offs))
	}
	inputs := ios(m.Inputs, gpfb.MetadataResponseStartInputsVector)
	outputs := ios(m.Outputs, gpfb.MetadataResponseStartOutputsVector)
	name := b.CreateString(m.Name)
	version := b.CreateString(m.Version)
	server := b.CreateString(m.Server)
	desc := b.CreateString(m.Description)
	gpfb.MetadataResponseStart(b)
	gpfb.MetadataResponseAddName(b, name)
	gpfb.MetadataResponseAddVersion(b, version)
	gpfb.MetadataResponseAddServer(b, server)
	gpfb.MetadataResponseAddDescription(b, desc)
	gpfb.MetadataResponseAddInputs(b, inputs)
	gpfb.MetadataResponseAddOutputs(b, outputs)
	return finish(dst, b, gpfb.MetadataResponseEnd(b))
}
