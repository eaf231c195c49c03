package oip

import (
	"strconv"
	"sync"

	"github.com/groveml/grove/internal/jsonscan"
	"github.com/groveml/grove/servables"
)

// span locates a decoded string in parser.strs.
type span struct{ a, b int }

// paramRec is one scanned parameter.
type paramRec struct {
	key  span
	kind ParamKind
	str  span
	b    bool
	i    int64
	u    uint64
	f    float64
}

// Members of an input or output object, one bit each, to find duplicates.
const (
	memName uint8 = 1 << iota
	memDatatype
	memShape
	memData
	memParameters
)

// inputRec is what the scan learnt about one element of "inputs".
type inputRec struct {
	typ      byte   // first byte of the element ('{' for an object)
	seen     uint8  // members seen
	problem  string // first problem found while scanning its members
	nameTyp  byte   // first byte of the name's value; 0 if absent or null
	name     jsonscan.Str
	dtTyp    byte
	dtype    jsonscan.Str
	shapeTyp byte
	d0, d1   int    // its dimensions, parser.dims[d0:d1]
	shapeBad string // the first bad dimension
	prod     int64  // product of the dimensions (valid when shapeBad is empty)
	dataTyp  byte
	dataPos  int    // offset of the data array
	decoded  bool   // data was decoded during the scan
	data     []byte // the tensor bytes
	dataBad  string // the problem found while decoding data during the scan
	p0, p1   int    // its parameters, parser.params[p0:p1]
	nameSpan span
	dt       *datatype
}

// outputRec is what the scan learnt about one element of "outputs".
type outputRec struct {
	typ      byte
	seen     uint8
	problem  string
	nameTyp  byte
	name     jsonscan.Str
	p0, p1   int
	nameSpan span
	binary   int8 // -1 unset, 0 false, 1 true (binary_data)
}

// parser holds the state of one parse; it is pooled, so its slices are
// reused across requests.
type parser struct {
	jsonscan.Scanner
	invalid   *Error // the first error of a well-formed request, unless a syntax error came first
	tail      []byte // the binary data after the JSON
	tailPos   int
	inputs    []inputRec
	outputs   []outputRec
	params    []paramRec
	dims      []int64
	idx       []int64             // nested data indices
	strs      []byte              // every decoded string of the result
	scratch   []byte              // unescaped member names and datatypes
	arena     []uint64            // data decoded before its tensor is allocated
	out       []byte              // where data is being decoded: a tensor or the arena
	outDirect bool                // out is the tensor itself
	outMax    int                 // the tensor's element count
	names     map[string]int      // input names, for many inputs
	onames    map[string]int      // requested output names, for many outputs
	keys      map[string]struct{} // parameter names, for long parameter objects
	seenRoot  uint8
	id        span
	hasID     bool
	rp0, rp1  int // request parameters
	binOut    bool
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// Root members, one bit each.
const (
	rootID uint8 = 1 << iota
	rootParameters
	rootInputs
	rootOutputs
)

// ParseInferRequest parses an $inference_request. headerLen is the value of
// the Inference-Header-Content-Length header, or 0 without one: when it is
// positive, body[:headerLen] is the JSON and body[headerLen:] the binary
// data of the inputs that have a binary_data_size parameter. Errors are
// *Error values with Status 400. body is not retained: the tensors own
// their memory.
func ParseInferRequest(body []byte, headerLen int) (*InferRequest, error) {
	if headerLen < 0 || headerLen > len(body) {
		return nil, badRequest(HeaderContentLength + " is " + strconv.Itoa(headerLen) + ", but it must be between 0 (no binary data) and the body length (" + strconv.Itoa(len(body)) + " bytes)")
	}
	p := parserPool.Get().(*parser)
	p.reset(body, headerLen)
	req := p.parse()
	err := p.error()
	p.release()
	if err != nil {
		return nil, err
	}
	return req, nil
}

func (p *parser) reset(body []byte, headerLen int) {
	if headerLen > 0 {
		p.Reset(body[:headerLen])
		p.tail = body[headerLen:]
	} else {
		p.Reset(body)
		p.tail = nil
	}
	p.tailPos = 0
	p.inputs, p.outputs, p.params, p.dims = p.inputs[:0], p.outputs[:0], p.params[:0], p.dims[:0]
	p.strs, p.scratch = p.strs[:0], p.scratch[:0]
	p.seenRoot, p.hasID, p.id, p.rp0, p.rp1, p.binOut = 0, false, span{}, 0, 0, false
}

// maxPooled bounds the slices a pooled parser keeps.
const maxPooled = 1 << 12

func (p *parser) release() {
	clear(p.inputs) // drop the tensor buffers
	p.Release()
	p.tail, p.invalid, p.out = nil, nil, nil
	if len(p.arena) > 1<<17 {
		p.arena = nil // keep at most 1 MiB
	}
	if len(p.names) > maxPooled || len(p.onames) > maxPooled || len(p.keys) > maxPooled {
		return // let an oversized parser go
	}
	clear(p.names)
	clear(p.onames)
	clear(p.keys)
	if cap(p.inputs) > maxPooled || cap(p.outputs) > maxPooled || cap(p.params) > maxPooled ||
		cap(p.dims) > maxPooled || cap(p.idx) > maxPooled || cap(p.strs) > 1<<16 ||
		cap(p.scratch) > 1<<16 {
		return
	}
	parserPool.Put(p)
}

// fail records the first error of a request that is well-formed JSON so
// far, and returns false.
func (p *parser) fail(msg string) bool {
	if p.invalid == nil && p.Err == jsonscan.OK {
		p.invalid = badRequest(msg)
	}
	return false
}

// error returns the first error of the parse, or nil: a syntax error
// comes first unless fail recorded its error before the scanner found it.
func (p *parser) error() *Error {
	if p.invalid != nil {
		return p.invalid
	}
	if p.Err != jsonscan.OK {
		return syntaxError(&p.Scanner)
	}
	return nil
}

// intern appends the decoded string to p.strs.
func (p *parser) intern(r jsonscan.Str) span {
	a := len(p.strs)
	if r.Esc {
		p.strs = jsonscan.Unescape(p.strs, p.Buf[r.Start:r.End])
	} else {
		p.strs = append(p.strs, p.Buf[r.Start:r.End]...)
	}
	return span{a, len(p.strs)}
}

func (p *parser) spanBytes(s span) []byte { return p.strs[s.a:s.b] }

// key returns the decoded string r, valid until the next call.
func (p *parser) key(r jsonscan.Str) []byte {
	if !r.Esc {
		return p.Buf[r.Start:r.End]
	}
	p.scratch = jsonscan.Unescape(p.scratch[:0], p.Buf[r.Start:r.End])
	return p.scratch
}

// object scans the object at p.Pos, handing each member to f, which must
// consume the member's value.
func (p *parser) object(f func(k []byte) bool) bool {
	for more := p.Open(); more; {
		k, ok := p.MemberName()
		if !ok || !f(p.key(k)) {
			return false
		}
		if more, ok = p.Next('}'); !ok {
			return false
		}
	}
	return true
}

// array scans the array at p.Pos, handing each element to f, which must
// consume it.
func (p *parser) array(f func(i int) bool) bool {
	for i, more := 0, p.Open(); more; i++ {
		if !f(i) {
			return false
		}
		var ok bool
		if more, ok = p.Next(']'); !ok {
			return false
		}
	}
	return true
}

// typeAt returns the first byte of the value at p.Pos, 'n' for null.
func (p *parser) typeAt() byte { return p.Peek() }

func (p *parser) parse() *InferRequest {
	p.SkipWS()
	if p.Pos >= len(p.Buf) {
		p.Fail(jsonscan.DocumentEmpty, p.Pos)
		return nil
	}
	if c := p.Peek(); c != '{' {
		if !p.SkipValue() {
			return nil
		}
		p.fail("the request is " + jsonType(c) + ", not a JSON object")
		return nil
	}
	if !p.object(p.rootMember) {
		return nil
	}
	p.SkipWS()
	if p.Pos < len(p.Buf) {
		p.Fail(jsonscan.RootNotSingular, p.Pos)
		return nil
	}
	if p.seenRoot&rootInputs == 0 {
		p.fail("the request has no inputs")
		return nil
	}
	if len(p.inputs) == 0 {
		p.fail("the request's inputs array is empty")
		return nil
	}
	if rest := len(p.tail) - p.tailPos; rest > 0 {
		p.fail("the request has " + count(int64(rest), "byte") + " of binary data after the JSON that no input claims (the inputs' binary_data_size parameters add up to " + strconv.Itoa(p.tailPos) + ")")
		return nil
	}
	if i := p.findParam(p.rp0, p.rp1, ParamBinaryDataOutput); i >= 0 {
		r := &p.params[i]
		if r.kind != ParamBool {
			p.fail("request parameter " + ParamBinaryDataOutput + " is " + r.kind.phrase() + ", not a boolean")
			return nil
		}
		p.binOut = r.b
	}
	return p.build()
}

func (p *parser) rootMember(k []byte) bool {
	typ := p.typeAt()
	var bit uint8
	switch string(k) {
	case "id":
		bit = rootID
	case "parameters":
		bit = rootParameters
	case "inputs":
		bit = rootInputs
	case "outputs":
		bit = rootOutputs
	default:
		return p.SkipValue()
	}
	if p.seenRoot&bit != 0 {
		return p.fail("the request has member " + strconv.Quote(string(k)) + " twice")
	}
	if typ == 'n' {
		if bit == rootInputs {
			return p.fail("the request's inputs is null, not an array")
		}
		return p.Literal("null") // absent
	}
	p.seenRoot |= bit
	switch bit {
	case rootID:
		if typ != '"' {
			return p.fail("the request's id is " + jsonType(typ) + ", not a string")
		}
		r, ok := p.ScanString()
		if !ok {
			return false
		}
		p.id, p.hasID = p.intern(r), true
		return true
	case rootParameters:
		if typ != '{' {
			return p.fail("the request's parameters is " + jsonType(typ) + ", not an object")
		}
		var problem string
		var ok bool
		p.rp0, p.rp1, problem, ok = p.paramObject()
		if !ok {
			return false
		}
		if problem != "" {
			return p.fail("request parameters: " + problem)
		}
		return true
	case rootInputs:
		if typ != '[' {
			return p.fail("the request's inputs is " + jsonType(typ) + ", not an array")
		}
		return p.array(p.input)
	default: // rootOutputs
		if typ != '[' {
			return p.fail("the request's outputs is " + jsonType(typ) + ", not an array")
		}
		return p.array(p.output)
	}
}

// paramObject scans a $parameters object at p.Pos. A problem (duplicate
// name, value of the wrong type) does not stop the scan.
func (p *parser) paramObject() (p0, p1 int, problem string, ok bool) {
	p0 = len(p.params)
	ok = p.object(func(k []byte) bool {
		ks := len(p.strs)
		p.strs = append(p.strs, k...)
		key := span{ks, len(p.strs)}
		dup := p.dupParam(p0, key)
		if dup && problem == "" {
			problem = "parameter " + quote(k) + " appears twice"
		}
		r := paramRec{key: key}
		switch c := p.Peek(); {
		case c == '"':
			s, ok := p.ScanString()
			if !ok {
				return false
			}
			r.kind, r.str = ParamString, p.intern(s)
		case c == 't' || c == 'f':
			lit := "false"
			if c == 't' {
				lit = "true"
			}
			if !p.Literal(lit) {
				return false
			}
			r.kind, r.b = ParamBool, c == 't'
		case c == '-' || jsonscan.IsDigit(c):
			var n jsonscan.Number
			if !p.LexNumber(&n) {
				return false
			}
			mag, isInt := n.Uint(p.Buf)
			switch {
			case isInt && !n.Neg && mag <= 1<<63-1:
				r.kind, r.i = ParamInt, int64(mag)
			case isInt && n.Neg && mag <= 1<<63:
				r.kind, r.i = ParamInt, int64(-mag)
			case isInt && !n.Neg:
				r.kind, r.u = ParamUint, mag
			default:
				f, inRange := n.Float(p.Buf, 64)
				if !inRange && problem == "" {
					problem = "parameter " + quote(k) + " = " + p.literalText(&n) + " is out of the range of a float64"
				}
				r.kind, r.f = ParamFloat, f
			}
		case c == 'n' || c == '{' || c == '[':
			if problem == "" {
				problem = "parameter " + quote(k) + " is " + jsonType(c) + "; parameter values must be strings, numbers or booleans"
			}
			return p.SkipValue()
		default:
			return p.Fail(jsonscan.ValueInvalid, p.Pos)
		}
		if !dup {
			p.params = append(p.params, r)
		}
		return true
	})
	return p0, len(p.params), problem, ok
}

// dupParam reports whether the parameter name key (the last string in
// p.strs) is already among p.params[p0:]. Long objects are indexed with a
// map.
func (p *parser) dupParam(p0 int, key span) bool {
	const linear = 32
	n := len(p.params) - p0
	k := p.spanBytes(key)
	if n < linear {
		return p.findParam(p0, len(p.params), jsonscan.View(k)) >= 0
	}
	if n == linear {
		if p.keys == nil {
			p.keys = make(map[string]struct{})
		}
		clear(p.keys)
		for i := p0; i < len(p.params); i++ {
			p.keys[string(p.spanBytes(p.params[i].key))] = struct{}{}
		}
	}
	_, dup := p.keys[string(k)]
	if !dup {
		p.keys[string(k)] = struct{}{}
	}
	return dup
}

// findParam returns the index of the parameter named name in
// p.params[p0:p1], or -1.
func (p *parser) findParam(p0, p1 int, name string) int {
	for i := p0; i < p1; i++ {
		if jsonscan.View(p.spanBytes(p.params[i].key)) == name {
			return i
		}
	}
	return -1
}

// inputName returns how messages name input i.
func (p *parser) inputName(i int) string {
	r := &p.inputs[i]
	if r.nameSpan.b > r.nameSpan.a {
		return "input " + quote(p.spanBytes(r.nameSpan))
	}
	return "inputs[" + strconv.Itoa(i) + "]"
}

// input scans element i of "inputs".
func (p *parser) input(i int) bool {
	p.inputs = append(p.inputs, inputRec{typ: p.typeAt(), dataPos: -1})
	if p.Peek() != '{' {
		if !p.SkipValue() {
			return false
		}
		return p.fail("inputs[" + strconv.Itoa(i) + "] is " + jsonType(p.inputs[i].typ) + ", not an object")
	}
	p.inputs[i].p0, p.inputs[i].p1 = len(p.params), len(p.params)
	if !p.object(func(k []byte) bool { return p.inputMember(i, k) }) {
		return false
	}
	return p.finishInput(i)
}

func (p *parser) inputMember(i int, k []byte) bool {
	r := &p.inputs[i]
	var bit uint8
	switch string(k) {
	case "name":
		bit = memName
	case "datatype":
		bit = memDatatype
	case "shape":
		bit = memShape
	case "data":
		bit = memData
	case "parameters":
		bit = memParameters
	default:
		return p.SkipValue()
	}
	if r.seen&bit != 0 {
		if r.problem == "" {
			r.problem = "has member " + strconv.Quote(string(k)) + " twice"
		}
		return p.SkipValue()
	}
	r.seen |= bit
	typ := p.typeAt()
	if typ == 'n' {
		return p.Literal("null") // absent
	}
	switch bit {
	case memName:
		r.nameTyp = typ
		if typ == '"' {
			var ok bool
			r.name, ok = p.ScanString()
			return ok
		}
	case memDatatype:
		r.dtTyp = typ
		if typ == '"' {
			var ok bool
			r.dtype, ok = p.ScanString()
			return ok
		}
	case memShape:
		r.shapeTyp = typ
		if typ == '[' {
			return p.shape(i)
		}
	case memData:
		r.dataTyp = typ
		if typ == '[' {
			r.dataPos = p.Pos
			if d := p.earlyType(r); d != nil {
				// datatype and shape came first: decode now.
				data, problem, ok := p.decodeData(d, p.dims[r.d0:r.d1], int(r.prod))
				if !ok {
					return false
				}
				r = &p.inputs[i]
				r.decoded, r.data, r.dataBad = true, data, problem
				return true
			}
		}
	case memParameters:
		if typ != '{' {
			if r.problem == "" {
				r.problem = "has parameters that are " + jsonType(typ) + ", not an object"
			}
			break
		}
		p0, p1, problem, ok := p.paramObject()
		if !ok {
			return false
		}
		r = &p.inputs[i]
		r.p0, r.p1 = p0, p1
		if problem != "" && r.problem == "" {
			r.problem = "parameters: " + problem
		}
		return true
	}
	return p.SkipValue()
}

// shape scans the shape array of input i.
func (p *parser) shape(i int) bool {
	r := &p.inputs[i]
	r.d0, r.prod = len(p.dims), 1
	ok := p.array(func(j int) bool {
		r := &p.inputs[i]
		c := p.Peek()
		if c != '-' && !jsonscan.IsDigit(c) {
			if r.shapeBad == "" {
				r.shapeBad = "shape[" + strconv.Itoa(j) + "] is " + jsonType(c) + ", not an integer"
			}
			return p.SkipValue()
		}
		var n jsonscan.Number
		if !p.LexNumber(&n) {
			return false
		}
		if r.shapeBad != "" {
			return true
		}
		mag, isInt := n.Uint(p.Buf)
		switch {
		case !n.IsInt:
			r.shapeBad = "shape[" + strconv.Itoa(j) + "] = " + p.literalText(&n) + " is not an integer"
		case n.Neg && mag != 0:
			r.shapeBad = "shape[" + strconv.Itoa(j) + "] = " + p.literalText(&n) + " is negative; dimensions must be at least 1"
		case mag == 0:
			r.shapeBad = "shape[" + strconv.Itoa(j) + "] is 0; dimensions must be at least 1 (Grove has no empty tensors)"
		case !isInt || mag > servables.MaxElements || uint64(r.prod)*mag > servables.MaxElements:
			r.shapeBad = "shape has more than " + strconv.Itoa(servables.MaxElements) + " elements"
		default:
			p.dims = append(p.dims, int64(mag))
			r.prod *= int64(mag)
		}
		return true
	})
	p.inputs[i].d1 = len(p.dims)
	return ok
}

// earlyType returns the datatype of r when its datatype and shape are
// already known to be valid, so that its data can be decoded during the
// scan.
func (p *parser) earlyType(r *inputRec) *datatype {
	if r.dtTyp != '"' || r.shapeTyp != '[' || r.shapeBad != "" {
		return nil
	}
	return lookupDatatype(p.key(r.dtype))
}

// finishInput checks input i once its object is scanned, decodes its data
// if that is still to do, and takes its binary data.
func (p *parser) finishInput(i int) bool {
	r := &p.inputs[i]
	fail := func(rest string) bool { return p.fail(p.inputName(i) + rest) }
	switch r.nameTyp {
	case 0:
		return fail(" has no name")
	case '"':
	default:
		return fail(" has a name that is " + jsonType(r.nameTyp) + ", not a string")
	}
	if r.name.End == r.name.Start {
		return fail(" has an empty name")
	}
	r.nameSpan = p.intern(r.name)
	name := p.spanBytes(r.nameSpan)
	if j := p.findName(i, name); j >= 0 {
		return p.fail("input " + quote(name) + " appears twice in the request (inputs[" + strconv.Itoa(j) + "] and inputs[" + strconv.Itoa(i) + "])")
	}
	if r.problem != "" {
		return fail(" " + r.problem)
	}
	switch r.dtTyp {
	case 0:
		return fail(" has no datatype")
	case '"':
	default:
		return fail(" has a datatype that is " + jsonType(r.dtTyp) + ", not a string")
	}
	dtName := p.key(r.dtype)
	r.dt = lookupDatatype(dtName)
	if r.dt == nil {
		return fail(": " + datatypeProblem(dtName))
	}
	switch r.shapeTyp {
	case 0:
		return fail(" has no shape")
	case '[':
	default:
		return fail(" has a shape that is " + jsonType(r.shapeTyp) + ", not an array")
	}
	if r.shapeBad != "" {
		return fail(": " + r.shapeBad)
	}
	for _, name := range [...]string{"shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"} {
		if p.findParam(r.p0, r.p1, name) >= 0 {
			return fail(": parameter " + name + " is not supported (Grove has no shared memory extension)")
		}
	}
	bin := p.findParam(r.p0, r.p1, ParamBinaryDataSize)
	shape := p.dims[r.d0:r.d1]
	n := int(r.prod)
	if bin >= 0 {
		if r.dataTyp != 0 {
			return fail(" has both data and a " + ParamBinaryDataSize + " parameter; give one of them")
		}
		return p.binaryInput(i, &p.params[bin], n, shape)
	}
	switch r.dataTyp {
	case 0:
		return fail(" has no data (and no " + ParamBinaryDataSize + " parameter)")
	case '[':
	default:
		return fail(" has data that is " + jsonType(r.dataTyp) + ", not an array")
	}
	if !r.decoded {
		// data came before datatype or shape: decode it now.
		end := p.Pos
		p.Pos = r.dataPos
		data, problem, ok := p.decodeData(r.dt, shape, n)
		if !ok {
			return false
		}
		p.Pos = end
		r = &p.inputs[i]
		r.decoded, r.data, r.dataBad = true, data, problem
	}
	if r.dataBad != "" {
		return fail(": " + r.dataBad)
	}
	return true
}

// binaryInput takes the binary data of input i from the body's tail.
func (p *parser) binaryInput(i int, bin *paramRec, n int, shape []int64) bool {
	r := &p.inputs[i]
	fail := func(rest string) bool { return p.fail(p.inputName(i) + rest) }
	var size uint64
	switch bin.kind {
	case ParamInt:
		if bin.i < 0 {
			return fail(": parameter " + ParamBinaryDataSize + " is " + strconv.FormatInt(bin.i, 10) + "; it must be a byte count")
		}
		size = uint64(bin.i)
	case ParamUint:
		size = bin.u
	default:
		return fail(": parameter " + ParamBinaryDataSize + " is " + bin.kind.phrase() + ", not an integer byte count")
	}
	if p.tail == nil {
		return fail(" has a " + ParamBinaryDataSize + " parameter, but the request has no binary data: send the length of the JSON in the " + HeaderContentLength + " header")
	}
	want := uint64(n) * uint64(r.dt.size()) // at most 2^31 × 8
	if size != want && r.dt.kind != kindBytes {
		return fail(": " + ParamBinaryDataSize + " is " + strconv.FormatUint(size, 10) + " bytes, but shape " + fmtShape(shape) + " of " + r.dt.name + " needs " + strconv.FormatUint(want, 10))
	}
	if rest := uint64(len(p.tail) - p.tailPos); size > rest {
		left := " of binary data are left after the JSON"
		if rest == 1 {
			left = " of binary data is left after the JSON"
		}
		if p.tailPos > 0 {
			left += " and the previous binary inputs"
		}
		return fail(": " + ParamBinaryDataSize + " is " + strconv.FormatUint(size, 10) + " bytes, but only " + count(int64(rest), "byte") + left)
	}
	data := alignedBytes(int(size))
	copy(data, p.tail[p.tailPos:])
	if r.dt.kind == kindBool {
		if err := servables.CheckBools(data); err != nil {
			return fail(": binary data " + err.Error())
		}
	}
	if r.dt.kind == kindBytes {
		if err := servables.CheckBytes(data, n); err != nil {
			return fail(": its " + strconv.FormatUint(size, 10) + " bytes of binary data are not " + strconv.Itoa(n) + " elements of shape " + fmtShape(shape) + ", each a 4-byte little-endian length and that many bytes: " + err.Error())
		}
	}
	p.tailPos += int(size)
	r.decoded, r.data = true, data
	return true
}

// findName returns the index of an earlier input named name, or -1.
func (p *parser) findName(i int, name []byte) int {
	return p.findDup(i, name, func(j int) span { return p.inputs[j].nameSpan }, &p.names)
}

// findDup returns the index j < i whose name, nameAt(j), is name, or -1.
// Past a few names they are indexed in *set, which must serve one list
// only per parse.
func (p *parser) findDup(i int, name []byte, nameAt func(j int) span, set *map[string]int) int {
	const linear = 32
	if i < linear {
		for j := 0; j < i; j++ {
			if string(p.spanBytes(nameAt(j))) == string(name) {
				return j
			}
		}
		return -1
	}
	if *set == nil {
		*set = make(map[string]int)
	}
	m := *set
	if len(m) == 0 {
		for j := 0; j < i; j++ {
			m[string(p.spanBytes(nameAt(j)))] = j
		}
	}
	if j, dup := m[string(name)]; dup {
		return j
	}
	m[string(name)] = i
	return -1
}

// outputName returns how messages name requested output i.
func (p *parser) outputName(i int) string {
	r := &p.outputs[i]
	if r.nameSpan.b > r.nameSpan.a {
		return "requested output " + quote(p.spanBytes(r.nameSpan))
	}
	return "outputs[" + strconv.Itoa(i) + "]"
}

// output scans element i of "outputs".
func (p *parser) output(i int) bool {
	p.outputs = append(p.outputs, outputRec{typ: p.typeAt(), binary: -1})
	if p.Peek() != '{' {
		if !p.SkipValue() {
			return false
		}
		return p.fail("outputs[" + strconv.Itoa(i) + "] is " + jsonType(p.outputs[i].typ) + ", not an object")
	}
	p.outputs[i].p0, p.outputs[i].p1 = len(p.params), len(p.params)
	ok := p.object(func(k []byte) bool {
		r := &p.outputs[i]
		var bit uint8
		switch string(k) {
		case "name":
			bit = memName
		case "parameters":
			bit = memParameters
		default:
			return p.SkipValue()
		}
		if r.seen&bit != 0 {
			if r.problem == "" {
				r.problem = "has member " + strconv.Quote(string(k)) + " twice"
			}
			return p.SkipValue()
		}
		r.seen |= bit
		typ := p.typeAt()
		if typ == 'n' {
			return p.Literal("null")
		}
		if bit == memName {
			r.nameTyp = typ
			if typ == '"' {
				var ok bool
				r.name, ok = p.ScanString()
				return ok
			}
			return p.SkipValue()
		}
		if typ != '{' {
			if r.problem == "" {
				r.problem = "has parameters that are " + jsonType(typ) + ", not an object"
			}
			return p.SkipValue()
		}
		p0, p1, problem, ok := p.paramObject()
		if !ok {
			return false
		}
		r = &p.outputs[i]
		r.p0, r.p1 = p0, p1
		if problem != "" && r.problem == "" {
			r.problem = "parameters: " + problem
		}
		return true
	})
	if !ok {
		return false
	}
	return p.finishOutput(i)
}

func (p *parser) finishOutput(i int) bool {
	r := &p.outputs[i]
	fail := func(rest string) bool { return p.fail(p.outputName(i) + rest) }
	switch r.nameTyp {
	case 0:
		return fail(" has no name")
	case '"':
	default:
		return fail(" has a name that is " + jsonType(r.nameTyp) + ", not a string")
	}
	if r.name.End == r.name.Start {
		return fail(" has an empty name")
	}
	r.nameSpan = p.intern(r.name)
	name := p.spanBytes(r.nameSpan)
	if j := p.findDup(i, name, func(j int) span { return p.outputs[j].nameSpan }, &p.onames); j >= 0 {
		return p.fail("output " + quote(name) + " is requested twice (outputs[" + strconv.Itoa(j) + "] and outputs[" + strconv.Itoa(i) + "])")
	}
	if r.problem != "" {
		return fail(" " + r.problem)
	}
	if p.findParam(r.p0, r.p1, "classification") >= 0 {
		return fail(": parameter classification is not supported (Grove has no classification extension)")
	}
	for _, name := range [...]string{"shared_memory_region", "shared_memory_offset", "shared_memory_byte_size"} {
		if p.findParam(r.p0, r.p1, name) >= 0 {
			return fail(": parameter " + name + " is not supported (Grove has no shared memory extension)")
		}
	}
	if j := p.findParam(r.p0, r.p1, ParamBinaryData); j >= 0 {
		if p.params[j].kind != ParamBool {
			return fail(": parameter " + ParamBinaryData + " is " + p.params[j].kind.phrase() + ", not a boolean")
		}
		r.binary = 0
		if p.params[j].b {
			r.binary = 1
		}
	}
	return true
}

// build makes the request from the records. Every string of it is a slice
// of one string, every shape a slice of one []int64, and every parameter
// an element of one []Parameter.
func (p *parser) build() *InferRequest {
	strs := string(p.strs)
	str := func(s span) string { return strs[s.a:s.b] }
	req := &InferRequest{BinaryDataOutput: p.binOut}
	if p.hasID {
		req.ID = str(p.id)
	}
	var params []Parameter
	if len(p.params) > 0 {
		params = make([]Parameter, len(p.params))
		for i := range p.params {
			r := &p.params[i]
			params[i] = Parameter{Name: str(r.key), Kind: r.kind, Bool: r.b, Int: r.i, Uint: r.u, Float: r.f}
			if r.kind == ParamString {
				params[i].Str = str(r.str)
			}
		}
	}
	sub := func(p0, p1 int) Parameters {
		if p0 == p1 {
			return nil
		}
		return params[p0:p1:p1]
	}
	req.Parameters = sub(p.rp0, p.rp1)
	req.Inputs = make([]servables.Tensor, len(p.inputs))
	dims := make([]int64, len(p.dims))
	copy(dims, p.dims)
	for i := range p.inputs {
		r := &p.inputs[i]
		req.Inputs[i] = servables.Tensor{Name: str(r.nameSpan), DType: r.dt.dt, Shape: dims[r.d0:r.d1:r.d1], Data: r.data}
		if r.p1 > r.p0 {
			if req.InputParameters == nil {
				req.InputParameters = make([]Parameters, len(p.inputs))
			}
			req.InputParameters[i] = sub(r.p0, r.p1)
		}
	}
	if len(p.outputs) > 0 {
		req.Outputs = make([]RequestedOutput, len(p.outputs))
		for i := range p.outputs {
			r := &p.outputs[i]
			binary := p.binOut
			if r.binary >= 0 {
				binary = r.binary == 1
			}
			req.Outputs[i] = RequestedOutput{Name: str(r.nameSpan), Parameters: sub(r.p0, r.p1), Binary: binary}
		}
	}
	return req
}
