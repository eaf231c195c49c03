package ba

import (
	"fmt"
	"math"
	"strconv"
	"sync"
	"unsafe"

	"github.com/groveml/grove/internal/jsonscan"
	"github.com/groveml/grove/servables"
)

// Messages of the sidecar's request parser (request_parser.cc, json_util.h).
const (
	msgMissing        = "Missing %s in the JSON document"
	msgUnexpectedType = "Value of member: %s, has unexpected member type (expected: %d, observed: %d)"
	msgEmptyString    = "Value of member: %s, is unexpectedly an empty string."
	msgUnsupportedDT  = "Invalid JSON format: Unsupported 'data_type' field "
	msgDimNotPositive = "Invalid tensor dimension: it has to be greater than 0"
	msgNotQuoted      = "All numbers within the tensor_content must be enclosed in quotes"
	msgMismatch       = "Mismatch between the size of tensor_content (%d) and a product of tensor dimensions (%d)"
	msgConversion     = "Input Tensor Conversion Error. Message: Model %s encounters tensor parsing error: %s"
)

// Messages for cases that are undefined behaviour in the sidecar, where
// Grove had to choose.
const (
	msgElementType    = "Value of member: %s, has unexpected element type (expected: 3, observed: %d)"
	msgDimNotInteger  = "Invalid tensor dimension: it has to be an integer"
	msgTooManyElems   = "Invalid tensor shape: the product of tensor dimensions exceeds 2147483648"
	msgTensorsEmpty   = "tensors must not be empty"
	msgConfigsType    = "Value of member: configs, has unexpected member type (expected: 3, observed: %d)"
	msgConfigItemType = "Value of member: configs.%s, has unexpected member type (expected: 5, observed: %d)"
)

// Conversion failures (request_parser.cc Convert<T>).
const (
	msgFloatConv  = "Error in float conversion"
	msgDoubleConv = "Error in double conversion"
	msgInt8Conv   = "Error in int8 conversion"
	msgInt16Conv  = "Error in int16 conversion"
	msgInt32Conv  = "Error in int32 conversion"
	msgInt64Conv  = "Error in int64 conversion"
	msgInt8Range  = "The number is outside of bounds of int8_t."
	msgInt16Range = "The number is outside of bounds of int16_t."
)

// Shape problems, the first one found in element order.
const (
	shapeOK uint8 = iota
	shapeNotInteger
	shapeNotPositive
)

// itemRec is what the scan learnt about one element of the request array.
type itemRec struct {
	typ        int8 // rapidjson type of the element
	pathTyp    int8 // type of the first model_path member, or typeAbsent
	path       jsonscan.Str
	tensorsTyp int8
	t0, t1     int // its tensor records, p.tensors[t0:t1]
}

// tensorRec is what the scan learnt about one element of a tensors array.
type tensorRec struct {
	typ        int8
	nameTyp    int8
	name       jsonscan.Str
	dtypeTyp   int8
	dtype      jsonscan.Str
	shapeTyp   int8
	d0, d1     int   // its dimensions, p.dims[d0:d1]
	shapeBad   uint8 // shapeOK or the first problem
	prod       int64 // product of the dimensions, saturated above MaxElements
	contentTyp int8
	c0         int  // offset just after the content array's '['
	count      int  // number of content elements
	contentBad bool // an element is neither a string nor a number
	dt         servables.DType
	// converted is set when the content was converted during the scan
	// (data_type and tensor_shape came first, and the count matched): early
	// then holds the tensor, or convErr the message of the first element
	// that failed to convert.
	converted bool
	early     servables.Tensor
	convErr   string
}

type configRec struct {
	key, val jsonscan.Str
	valTyp   int8
}

// parser holds the scan state; it is pooled, so its slices are reused.
type parser struct {
	jsonscan.Scanner
	opts       ParseOptions
	requestTyp int8
	configsTyp int8
	items      []itemRec
	tensors    []tensorRec
	dims       []int64
	configs    []configRec
	scratch    []byte   // unescaped strings
	numScratch []byte   // hexadecimal floats
	earlyBuf   []uint64 // values converted during the scan, before their count is known
	lastPath   string   // model paths and tensor names are interned across items
	lastNames  []string
}

var parserPool = sync.Pool{New: func() any { return new(parser) }}

// Member-name contexts for parser.object.
const (
	inRoot = iota
	inItem
	inTensor
	inConfigs
)

// maxPooled bounds the record slices a pooled parser keeps.
const maxPooled = 1 << 12

// ParseOptions are a server's settings for parsing B&A requests.
type ParseOptions struct {
	// AcceptUnquotedNumbers lets JSON numbers through in tensor_content
	// (the server setting ba_accept_unquoted_numbers). Without it, as in
	// the sidecar, a number that is not a string fails its item with
	// INPUT_PARSING "All numbers within the tensor_content must be
	// enclosed in quotes".
	AcceptUnquotedNumbers bool
}

// ParseRequest parses a runInference batch request. A non-nil *Error is a
// batch-level INPUT_PARSING failure (malformed JSON, missing or mistyped
// "request", invalid "configs"); otherwise each Item carries either its
// tensors or its own INPUT_PARSING error (Err, or InputErr for the
// failures the sidecar finds after its model lookup). body is not retained.
func (o ParseOptions) ParseRequest(body []byte) (*Request, *Error) {
	p := parserPool.Get().(*parser)
	p.reset(body, o)
	req, err := p.parse()
	p.release()
	return req, err
}

func (p *parser) reset(body []byte, opts ParseOptions) {
	p.Reset(body)
	p.RapidjsonNumbers = true
	p.opts = opts
	p.requestTyp, p.configsTyp = typeAbsent, typeAbsent
	p.items, p.tensors, p.dims, p.configs = p.items[:0], p.tensors[:0], p.dims[:0], p.configs[:0]
	p.lastPath, p.lastNames = "", p.lastNames[:0]
}

func (p *parser) release() {
	clear(p.tensors) // drop references to the returned tensors
	p.Release()
	if cap(p.earlyBuf) > 1<<17 {
		p.earlyBuf = nil
	}
	p.lastPath = ""
	clear(p.lastNames)
	if cap(p.items) > maxPooled || cap(p.tensors) > maxPooled || cap(p.dims) > maxPooled ||
		cap(p.scratch) > 1<<16 {
		return // let an oversized parser go
	}
	parserPool.Put(p)
}

// requestBlock is a parsed request with room for the items and input
// tensors of a small batch, so that parsing a batch of one item with a
// few inputs, the common request, allocates them at once.
type requestBlock struct {
	req    Request
	items  [1]Item
	inputs [2]servables.Tensor
}

func (p *parser) parse() (*Request, *Error) {
	if !p.scanDocument() {
		return nil, inputError("JSON Parse Error: " + syntaxMessage(&p.Scanner))
	}
	switch {
	case p.requestTyp == typeAbsent:
		return nil, inputError(fmt.Sprintf(msgMissing, "request"))
	case p.requestTyp != typeArray:
		return nil, inputError(fmt.Sprintf(msgUnexpectedType, "request", typeArray, p.requestTyp))
	}
	blk := &requestBlock{}
	req := &blk.req
	if p.configsTyp != typeAbsent {
		cfg, err := p.buildConfigs()
		if err != nil {
			return nil, err
		}
		req.Configs = cfg
	}
	if len(p.items) == 0 {
		return req, nil
	}
	if len(p.items) <= len(blk.items) {
		req.Items = blk.items[:len(p.items)]
	} else {
		req.Items = make([]Item, len(p.items))
	}
	var inputs []servables.Tensor
	switch {
	case len(p.tensors) == 0:
	case len(p.tensors) <= len(blk.inputs):
		inputs = blk.inputs[:len(p.tensors)]
	default:
		inputs = make([]servables.Tensor, len(p.tensors))
	}
	for i := range p.items {
		p.buildItem(&req.Items[i], &p.items[i], inputs)
	}
	return req, nil
}

// scanDocument validates the whole document, recording the members the
// request format cares about (the first occurrence of each, as rapidjson's
// FindMember does).
func (p *parser) scanDocument() bool {
	p.SkipWS()
	if p.Peek() == 0 {
		return p.Fail(jsonscan.DocumentEmpty, p.Pos)
	}
	if p.Peek() == '{' {
		if !p.object(inRoot, 0) {
			return false
		}
	} else if !p.SkipValue() {
		return false
	}
	p.SkipWS()
	if p.Pos < len(p.Buf) {
		return p.Fail(jsonscan.RootNotSingular, p.Pos)
	}
	return true
}

// object scans the object at p.Pos, handing each member to p.member.
func (p *parser) object(ctx, idx int) bool {
	for more := p.Open(); more; {
		k, ok := p.MemberName()
		if !ok || !p.member(ctx, idx, k) {
			return false
		}
		if more, ok = p.Next('}'); !ok {
			return false
		}
	}
	return true
}

// array scans the array at p.Pos, handing each element to p.element.
func (p *parser) array(ctx, idx int) bool {
	for more := p.Open(); more; {
		if !p.element(ctx, idx) {
			return false
		}
		var ok bool
		if more, ok = p.Next(']'); !ok {
			return false
		}
	}
	return true
}

// Array contexts for parser.array.
const (
	ofRequest = iota
	ofTensors
	ofShape
)

// keyName returns the decoded member name; the result is only valid until
// the next call.
func (p *parser) keyName(k jsonscan.Str) string {
	if !k.Esc {
		return jsonscan.View(p.Buf[k.Start:k.End])
	}
	p.scratch = jsonscan.Unescape(p.scratch[:0], p.Buf[k.Start:k.End])
	return jsonscan.View(p.scratch)
}

// member scans one member value; p.Pos is at its first byte.
func (p *parser) member(ctx, idx int, k jsonscan.Str) bool {
	typ := typeOf(p.Peek())
	switch ctx {
	case inRoot:
		switch p.keyName(k) {
		case "request":
			if p.requestTyp != typeAbsent {
				break
			}
			p.requestTyp = typ
			if typ == typeArray {
				return p.array(ofRequest, 0)
			}
		case "configs":
			if p.configsTyp != typeAbsent {
				break
			}
			p.configsTyp = typ
			if typ == typeObject {
				return p.object(inConfigs, 0)
			}
		}
	case inConfigs:
		if typ == typeString {
			v, ok := p.ScanString()
			p.configs = append(p.configs, configRec{key: k, val: v, valTyp: typ})
			return ok
		}
		p.configs = append(p.configs, configRec{key: k, valTyp: typ})
	case inItem:
		it := &p.items[idx]
		switch p.keyName(k) {
		case "model_path":
			if it.pathTyp != typeAbsent {
				break
			}
			it.pathTyp = typ
			if typ == typeString {
				var ok bool
				it.path, ok = p.ScanString()
				return ok
			}
		case "tensors":
			if it.tensorsTyp != typeAbsent {
				break
			}
			it.tensorsTyp = typ
			if typ == typeArray {
				it.t0 = len(p.tensors)
				ok := p.array(ofTensors, idx)
				p.items[idx].t1 = len(p.tensors)
				return ok
			}
		}
	case inTensor:
		t := &p.tensors[idx]
		switch p.keyName(k) {
		case "tensor_name":
			if t.nameTyp != typeAbsent {
				break
			}
			t.nameTyp = typ
			if typ == typeString {
				var ok bool
				t.name, ok = p.ScanString()
				return ok
			}
		case "data_type":
			if t.dtypeTyp != typeAbsent {
				break
			}
			t.dtypeTyp = typ
			if typ == typeString {
				var ok bool
				t.dtype, ok = p.ScanString()
				return ok
			}
		case "tensor_shape":
			if t.shapeTyp != typeAbsent {
				break
			}
			t.shapeTyp = typ
			if typ == typeArray {
				t.d0, t.prod = len(p.dims), 1
				ok := p.array(ofShape, idx)
				p.tensors[idx].d1 = len(p.dims)
				return ok
			}
		case "tensor_content":
			if t.contentTyp != typeAbsent {
				break
			}
			t.contentTyp = typ
			if typ == typeArray {
				return p.content(idx)
			}
		}
	}
	return p.SkipValue()
}

// element scans one array element; p.Pos is at its first byte.
func (p *parser) element(ctx, idx int) bool {
	typ := typeOf(p.Peek())
	switch ctx {
	case ofRequest:
		p.items = append(p.items, itemRec{typ: typ, pathTyp: typeAbsent, tensorsTyp: typeAbsent})
		if typ == typeObject {
			return p.object(inItem, len(p.items)-1)
		}
	case ofTensors:
		p.tensors = append(p.tensors, tensorRec{typ: typ, nameTyp: typeAbsent, dtypeTyp: typeAbsent,
			shapeTyp: typeAbsent, contentTyp: typeAbsent})
		if typ == typeObject {
			return p.object(inTensor, len(p.tensors)-1)
		}
	case ofShape:
		t := &p.tensors[idx]
		if typ != typeNumber {
			if t.shapeBad == shapeOK {
				t.shapeBad = shapeNotInteger
			}
			break
		}
		var n jsonscan.Number
		if !p.LexNumber(&n) {
			return false
		}
		v := intValue(&n, p.Buf)
		switch {
		case t.shapeBad != shapeOK:
		case !n.IsInt:
			t.shapeBad = shapeNotInteger
		case v < 1:
			t.shapeBad = shapeNotPositive
		default:
			p.dims = append(p.dims, v)
			if v > servables.MaxElements || t.prod > servables.MaxElements/v {
				t.prod = servables.MaxElements + 1 // saturate
			} else {
				t.prod *= v
			}
		}
		return true
	}
	return p.SkipValue()
}

// intValue returns the value of the integer literal n, saturated to the
// int64 range.
func intValue(n *jsonscan.Number, buf []byte) int64 {
	mag, ok := n.Uint(buf)
	switch {
	case ok && mag <= math.MaxInt64 && n.Neg:
		return -int64(mag)
	case ok && mag <= math.MaxInt64:
		return int64(mag)
	case n.Neg:
		return math.MinInt64
	}
	return math.MaxInt64
}

// content scans a tensor_content array, counting its elements. When the
// tensor's data_type and tensor_shape were already seen and are valid, it
// also converts the elements as it goes, into a scratch buffer that grows
// with the elements actually present; the tensor itself is allocated only
// once their count matches the shape. Otherwise the elements are converted
// by fill once the item's structure is known to be right.
func (p *parser) content(idx int) bool {
	t := &p.tensors[idx]
	p.Pos++
	t.c0 = p.Pos
	dt, n := p.earlyType(t)
	convert := n > 0
	var out servables.Tensor // a view of p.earlyBuf
	if convert {
		out = servables.Tensor{DType: dt, Data: p.earlyBytes(0)}
	}
	p.SkipWS()
	if p.Peek() == ']' {
		p.Pos++
		return true
	}
	buf := p.Buf
	for {
		k := t.count
		t.count++
		var tok []byte
		switch c := p.Peek(); {
		case c == '"':
			// Inline fast path for plain strings such as "0.4549".
			i := p.Pos + 1
			j := jsonscan.PlainEnd(buf, i)
			if j < len(buf) && buf[j] == '"' {
				tok = buf[i:j]
				p.Pos = j + 1
			} else {
				ref, ok := p.ScanString()
				if !ok {
					return false
				}
				tok = buf[ref.Start:ref.End]
				if ref.Esc && convert {
					p.scratch = jsonscan.Unescape(p.scratch[:0], tok)
					tok = p.scratch
				}
			}
		case c == '-' || jsonscan.IsDigit(c):
			var n jsonscan.Number
			if !p.LexNumber(&n) {
				return false
			}
			tok = buf[n.Start:n.End]
			if !p.opts.AcceptUnquotedNumbers {
				t.contentBad = true
				convert = false
			}
		default:
			t.contentBad = true
			convert = false
			if !p.SkipValue() {
				return false
			}
		}
		if convert {
			if k >= n {
				convert = false // a count mismatch
			} else {
				if (k+1)*dt.Size() > len(out.Data) {
					out.Data = p.earlyBytes(k + 1)
				}
				if msg := p.convert(&out, k, tok); msg != "" {
					t.convErr = msg
					convert = false
				}
			}
		}
		p.SkipWS()
		switch p.Peek() {
		case ',':
			p.Pos++
			p.SkipWS()
		case ']':
			p.Pos++
			if n == 0 || t.count != n || t.contentBad {
				t.convErr = ""
				return true
			}
			t.converted = true
			if t.convErr == "" {
				tensor, err := servables.NewTensor("", dt, p.dims[t.d0:t.d1])
				if err != nil { // unreachable: the shape was checked
					t.converted = false
					return true
				}
				copy(tensor.Data, out.Data)
				t.early = tensor
			}
			return true
		default:
			return p.Fail(jsonscan.ArrayMissCommaOrSquareBracket, p.Pos)
		}
	}
}

// earlyType returns the data type and element count of t when they are
// already known to be valid, so that its content can be converted during
// the scan; otherwise n is 0.
func (p *parser) earlyType(t *tensorRec) (dt servables.DType, n int) {
	if t.dtypeTyp != typeString || t.dtype.Esc || t.shapeTyp != typeArray || t.shapeBad != shapeOK ||
		t.prod > servables.MaxElements {
		return 0, 0
	}
	dt, ok := parseDType(jsonscan.View(p.Buf[t.dtype.Start:t.dtype.End]))
	if !ok {
		return 0, 0
	}
	return dt, int(t.prod)
}

// earlyBytes returns p.earlyBuf as bytes, grown to hold at least n elements
// of 8 bytes (it doubles, so its size follows the elements seen).
func (p *parser) earlyBytes(n int) []byte {
	if n > len(p.earlyBuf) {
		grown := make([]uint64, max(n, 2*len(p.earlyBuf), 64))
		copy(grown, p.earlyBuf)
		p.earlyBuf = grown
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(p.earlyBuf))), 8*len(p.earlyBuf))
}

// str returns the decoded string, reusing prev when it is equal.
func (p *parser) str(r jsonscan.Str, prev string) string {
	b := p.Buf[r.Start:r.End]
	if r.Esc {
		p.scratch = jsonscan.Unescape(p.scratch[:0], b)
		b = p.scratch
	}
	if string(b) == prev {
		return prev
	}
	return string(b)
}

func (p *parser) buildConfigs() (map[string]string, *Error) {
	if p.configsTyp != typeObject {
		return nil, inputError(fmt.Sprintf(msgConfigsType, p.configsTyp))
	}
	cfg := make(map[string]string, len(p.configs))
	for _, c := range p.configs {
		key := p.str(c.key, "")
		if _, dup := cfg[key]; dup {
			continue
		}
		if c.valTyp != typeString {
			return nil, inputError(fmt.Sprintf(msgConfigItemType, key, c.valTyp))
		}
		cfg[key] = p.str(c.val, "")
	}
	return cfg, nil
}

// memberError returns the sidecar's error for a missing or mistyped member.
func memberError(name string, typ, want int8) *Error {
	if typ == typeAbsent {
		return inputError(fmt.Sprintf(msgMissing, name))
	}
	return inputError(fmt.Sprintf(msgUnexpectedType, name, want, typ))
}

// buildItem checks one item in the sidecar's order and converts its tensors.
func (p *parser) buildItem(out *Item, it *itemRec, inputs []servables.Tensor) {
	if it.typ != typeObject {
		out.Err = inputError(fmt.Sprintf(msgElementType, "request", it.typ))
		return
	}
	if it.pathTyp != typeString {
		out.Err = memberError("model_path", it.pathTyp, typeString)
		return
	}
	path := p.str(it.path, p.lastPath)
	if path == "" {
		out.Err = inputError(fmt.Sprintf(msgEmptyString, "model_path"))
		return
	}
	p.lastPath = path
	out.ModelPath = path
	if it.tensorsTyp != typeArray {
		out.Err = memberError("tensors", it.tensorsTyp, typeArray)
		return
	}
	if it.t0 == it.t1 {
		out.InputErr = inputError(msgTensorsEmpty)
		return
	}
	recs := p.tensors[it.t0:it.t1]
	for i := range recs {
		if err := p.checkTensor(&recs[i]); err != nil {
			out.Err = err
			return
		}
	}
	ts := inputs[it.t0:it.t1:it.t1]
	for i := range recs {
		t := &recs[i]
		name := ""
		if t.nameTyp == typeString {
			prev := ""
			if i < len(p.lastNames) {
				prev = p.lastNames[i]
			}
			name = p.str(t.name, prev)
			if i < len(p.lastNames) {
				p.lastNames[i] = name
			} else {
				p.lastNames = append(p.lastNames, name)
			}
		}
		tensor := t.early
		msg := t.convErr
		if t.converted {
			tensor.Name = name
		} else {
			var err error
			tensor, err = servables.NewTensor(name, t.dt, p.dims[t.d0:t.d1])
			if err != nil { // unreachable: checkTensor validated the shape
				out.Err = inputError(err.Error())
				return
			}
			msg = p.fill(&tensor, t)
		}
		if msg != "" {
			out.InputErr = inputError(fmt.Sprintf(msgConversion, path, msg))
			return
		}
		ts[i] = tensor
	}
	out.Inputs = ts
}

// checkTensor applies the sidecar's ParseTensor checks, in its order, and
// records the tensor's data type.
func (p *parser) checkTensor(t *tensorRec) *Error {
	if t.typ != typeObject {
		return inputError(fmt.Sprintf(msgElementType, "tensors", t.typ))
	}
	if t.dtypeTyp != typeString {
		return memberError("data_type", t.dtypeTyp, typeString)
	}
	name := p.Buf[t.dtype.Start:t.dtype.End]
	if t.dtype.Esc {
		p.scratch = jsonscan.Unescape(p.scratch[:0], name)
		name = p.scratch
	}
	if len(name) == 0 {
		return inputError(fmt.Sprintf(msgEmptyString, "data_type"))
	}
	dt, ok := parseDType(jsonscan.View(name))
	if !ok {
		return inputError(msgUnsupportedDT + string(name))
	}
	if t.shapeTyp != typeArray {
		return memberError("tensor_shape", t.shapeTyp, typeArray)
	}
	switch t.shapeBad {
	case shapeNotInteger:
		return inputError(msgDimNotInteger)
	case shapeNotPositive:
		return inputError(msgDimNotPositive)
	}
	if t.contentTyp != typeArray {
		return memberError("tensor_content", t.contentTyp, typeArray)
	}
	if t.contentBad {
		return inputError(msgNotQuoted)
	}
	if t.prod > servables.MaxElements {
		return inputError(msgTooManyElems)
	}
	if int64(t.count) != t.prod {
		return inputError(fmt.Sprintf(msgMismatch, t.count, t.prod))
	}
	t.dt = dt
	return nil
}

// contentIter walks the elements of a validated tensor_content array.
type contentIter struct {
	buf     []byte
	pos     int
	scratch *[]byte
}

// next returns the text of the next element: a string's decoded contents or
// a number's literal.
func (c *contentIter) next() []byte {
	buf, i := c.buf, c.pos
	for buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t' || buf[i] == ',' {
		i++
	}
	if buf[i] != '"' {
		j := i
		for j < len(buf) && (jsonscan.IsDigit(buf[j]) || buf[j] == '-' || buf[j] == '+' || buf[j] == '.' || buf[j]|0x20 == 'e') {
			j++
		}
		c.pos = j
		return buf[i:j]
	}
	i++
	j := i
	for buf[j] != '"' && buf[j] != '\\' {
		j++
	}
	if buf[j] == '"' {
		c.pos = j + 1
		return buf[i:j]
	}
	// Escapes: find the closing quote, skipping escaped characters.
	for buf[j] != '"' {
		if buf[j] == '\\' {
			j++
		}
		j++
	}
	c.pos = j + 1
	*c.scratch = jsonscan.Unescape((*c.scratch)[:0], buf[i:j])
	return *c.scratch
}

// fill converts the content of t into tensor's buffer, returning the
// conversion message of the first element that fails.
func (p *parser) fill(tensor *servables.Tensor, t *tensorRec) string {
	it := contentIter{buf: p.Buf, pos: t.c0, scratch: &p.scratch}
	for k, n := 0, tensor.Len(); k < n; k++ {
		if msg := p.convert(tensor, k, it.next()); msg != "" {
			return msg
		}
	}
	return ""
}

// convert stores element k of tensor from its text, returning the
// sidecar's Convert<T> message if the text is not a valid value.
func (p *parser) convert(tensor *servables.Tensor, k int, tok []byte) string {
	data := unsafe.Pointer(unsafe.SliceData(tensor.Data))
	switch tensor.DType {
	case servables.Float32:
		v, ok := parseFloat(tok, 32, &p.numScratch)
		if !ok {
			return msgFloatConv
		}
		*(*float32)(unsafe.Add(data, 4*k)) = float32(v)
	case servables.Float64:
		v, ok := parseFloat(tok, 64, &p.numScratch)
		if !ok {
			return msgDoubleConv
		}
		*(*float64)(unsafe.Add(data, 8*k)) = v
	case servables.Int8:
		v, ok := parseInt(tok, 32)
		if !ok {
			return msgInt8Conv
		}
		if v < -1<<7 || v > 1<<7-1 {
			return msgInt8Range
		}
		*(*int8)(unsafe.Add(data, k)) = int8(v)
	case servables.Int16:
		v, ok := parseInt(tok, 32)
		if !ok {
			return msgInt16Conv
		}
		if v < -1<<15 || v > 1<<15-1 {
			return msgInt16Range
		}
		*(*int16)(unsafe.Add(data, 2*k)) = int16(v)
	case servables.Int32:
		v, ok := parseInt(tok, 32)
		if !ok {
			return msgInt32Conv
		}
		*(*int32)(unsafe.Add(data, 4*k)) = int32(v)
	case servables.Int64:
		v, ok := parseInt(tok, 64)
		if !ok {
			return msgInt64Conv
		}
		*(*int64)(unsafe.Add(data, 8*k)) = v
	default:
		return "unsupported data type " + strconv.Quote(tensor.DType.String())
	}
	return ""
}
