package torch

import (
	"archive/zip"
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"strings"

	"github.com/groveml/grove/internal/capped"
	"github.com/groveml/grove/servables"
)

// checkPickles checks the stack use of every pickle (an entry whose name
// ends in "pkl": data.pkl, constants.pkl, ...) of the TorchScript archive
// at file before libtorch reads it, but for the extra files
// (<archive>/extra/<name>, torch.jit.save's _extra_files), which libtorch
// hands back as bytes and never unpickles: libtorch 1.13's unpickler pops its
// stack without looking (BUILD, REDUCE, TUPLE1, BINPERSID, ...), so a
// pickle that takes more values than it pushed crashes the process. A
// file Go cannot read as a zip archive is left to libtorch.
//
// First the archive's deflated entries, inflated, must add up to at most
// limit bytes (max_model_bytes; 0 means servables.DefaultMaxModelBytes):
// torch.jit.save deflates code/ and the .debug_pkl files, libtorch
// allocates each entry's inflated size to read it, and a small file may
// hold a deflate bomb. A stored entry takes what it declares from the file
// itself, which was held to max_model_bytes as it was fetched, so a file
// within that limit is never refused for its stored weights; one whose
// declared size is not the size it takes in the file, or whose stored
// entries declare more in all than the file holds (entries that share
// their bytes, each of which libtorch would copy), is refused as
// damaged. The sizes are those the archive's directory declares, before
// anything is inflated; Go's zip reader refuses an entry that inflates to
// more than its declared size. The pickles are then checked as they are
// inflated, never held in memory whole.
func checkPickles(file string, limit int64) error {
	zr, err := zip.OpenReader(file)
	if err != nil {
		return nil // not a zip archive Go reads: libtorch says what it is
	}
	defer zr.Close()
	fi, err := os.Stat(file)
	if err != nil {
		return fmt.Errorf("reading the archive's size: %w", err)
	}
	if limit <= 0 {
		limit = servables.DefaultMaxModelBytes
	}
	left, held := uint64(limit), uint64(fi.Size())
	for _, e := range zr.File {
		if e.Method == zip.Store {
			if e.UncompressedSize64 != e.CompressedSize64 {
				return fmt.Errorf("%s is damaged: stored, it declares %d bytes but takes %d in the file",
					e.Name, e.UncompressedSize64, e.CompressedSize64)
			}
			if e.UncompressedSize64 > held {
				return fmt.Errorf("%s is damaged: the stored entries up to it declare more than the file's %s",
					e.Name, capped.Size(fi.Size()))
			}
			held -= e.UncompressedSize64
			continue
		}
		if e.UncompressedSize64 > left {
			return fmt.Errorf("%s inflates to %s, which brings the archive's deflated entries past max_model_bytes (%s) inflated",
				e.Name, sizeOf(e.UncompressedSize64), capped.Size(limit))
		}
		left -= e.UncompressedSize64
	}
	br := bufio.NewReader(nil) // one buffer for every pickle of the archive
	for _, e := range zr.File {
		if !strings.HasSuffix(e.Name, "pkl") || e.FileInfo().IsDir() {
			continue
		}
		if _, rest, _ := strings.Cut(e.Name, "/"); strings.HasPrefix(rest, "extra/") {
			continue // an extra file: any bytes, never unpickled
		}
		if err := checkEntry(e, br); err != nil {
			return err
		}
	}
	return nil
}

// sizeOf writes a byte count as capped.Size does.
func sizeOf(n uint64) string {
	if n > math.MaxInt64 {
		return fmt.Sprintf("%d bytes", n)
	}
	return capped.Size(int64(n))
}

// checkEntry checks the pickle of one entry as it inflates it, through
// br, and reads the entry to its end, so that its checksum is checked too.
func checkEntry(e *zip.File, br *bufio.Reader) error {
	rc, err := e.Open()
	if err != nil {
		return fmt.Errorf("reading %s: %w", e.Name, err)
	}
	defer rc.Close()
	r := &errorKeeper{r: rc}
	br.Reset(r)
	err = walkPickle(br)
	if r.err != nil {
		return fmt.Errorf("reading %s: %w", e.Name, r.err)
	}
	if err != nil {
		return fmt.Errorf("%s is not a valid pickle: %w", e.Name, err)
	}
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("reading %s: %w", e.Name, err)
	}
	return nil
}

// errorKeeper reads r and keeps its first error other than io.EOF, which
// tells a damaged entry (a read error) from a damaged pickle.
type errorKeeper struct {
	r   io.Reader
	err error
}

func (k *errorKeeper) Read(p []byte) (int, error) {
	n, err := k.r.Read(p)
	if err != nil && err != io.EOF && k.err == nil {
		k.err = err
	}
	return n, err
}

// pickleOp is the stack effect of a pickle opcode (Python's pickletools):
// arg is the size of its fixed argument, or one of the argument kinds
// below; need is how many values it reads from the stack, pops how many
// it removes and pushes how many it adds; toMark pops to the last mark
// first, leaving below at least below values under it.
type pickleOp struct {
	arg, need, pops, pushes int
	toMark                  bool
	below                   int
}

// Argument kinds of pickleOp.arg besides a fixed size, and the two
// opcodes without a stack effect of that form.
const (
	argLine  = -1 // up to a newline
	argLine2 = -2 // two lines (GLOBAL, INST)
	argLen1  = -3 // a 1-byte length, then that many bytes
	argLen4  = -4 // a 4-byte little-endian length, then that many bytes
	argLen8  = -5 // an 8-byte little-endian length, then that many bytes
	markOp   = -6 // MARK
	stopOp   = -7 // STOP
)

// pickleOps are the opcodes of pickle protocols 0 to 5.
var pickleOps = map[byte]pickleOp{
	'(': {arg: markOp}, '.': {arg: stopOp},
	'0': {need: 1, pops: 1}, '1': {toMark: true}, '2': {need: 1, pushes: 1},
	'N': {pushes: 1}, 0x88: {pushes: 1}, 0x89: {pushes: 1},
	')': {pushes: 1}, ']': {pushes: 1}, '}': {pushes: 1}, 0x8f: {pushes: 1},
	't': {toMark: true, pushes: 1}, 'l': {toMark: true, pushes: 1}, 'd': {toMark: true, pushes: 1}, 0x91: {toMark: true, pushes: 1},
	0x85: {need: 1, pops: 1, pushes: 1}, 0x86: {need: 2, pops: 2, pushes: 1}, 0x87: {need: 3, pops: 3, pushes: 1},
	'a': {need: 2, pops: 1}, 'e': {toMark: true, below: 1},
	's': {need: 3, pops: 2}, 'u': {toMark: true, below: 1}, 0x90: {toMark: true, below: 1},
	'b': {need: 2, pops: 1}, 'R': {need: 2, pops: 2, pushes: 1},
	0x81: {need: 2, pops: 2, pushes: 1}, 0x92: {need: 3, pops: 3, pushes: 1}, 0x93: {need: 2, pops: 2, pushes: 1},
	'Q': {need: 1, pops: 1, pushes: 1}, 0x94: {need: 1}, 0x97: {pushes: 1}, 0x98: {need: 1},
	'o': {toMark: true, pushes: 1}, 'i': {arg: argLine2, toMark: true, pushes: 1},
	0x80: {arg: 1}, 0x95: {arg: 8},
	'J': {arg: 4, pushes: 1}, 'K': {arg: 1, pushes: 1}, 'M': {arg: 2, pushes: 1}, 'G': {arg: 8, pushes: 1},
	'I': {arg: argLine, pushes: 1}, 'L': {arg: argLine, pushes: 1}, 'F': {arg: argLine, pushes: 1},
	'S': {arg: argLine, pushes: 1}, 'V': {arg: argLine, pushes: 1}, 'P': {arg: argLine, pushes: 1},
	0x8a: {arg: argLen1, pushes: 1}, 0x8b: {arg: argLen4, pushes: 1},
	'T': {arg: argLen4, pushes: 1}, 'U': {arg: argLen1, pushes: 1}, 'B': {arg: argLen4, pushes: 1},
	'C': {arg: argLen1, pushes: 1}, 0x8e: {arg: argLen8, pushes: 1}, 'X': {arg: argLen4, pushes: 1},
	0x8c: {arg: argLen1, pushes: 1}, 0x8d: {arg: argLen8, pushes: 1}, 0x96: {arg: argLen8, pushes: 1},
	'c': {arg: argLine2, pushes: 1},
	'g': {arg: argLine, pushes: 1}, 'h': {arg: 1, pushes: 1}, 'j': {arg: 4, pushes: 1},
	'p': {arg: argLine, need: 1}, 'q': {arg: 1, need: 1}, 'r': {arg: 4, need: 1},
	0x82: {arg: 1, pushes: 1}, 0x83: {arg: 2, pushes: 1}, 0x84: {arg: 4, pushes: 1},
}

// checkPickle walks the opcodes of one pickle read from r up to its STOP,
// counting the values on the stack (one flat stack with marks at depths,
// as libtorch keeps it), and fails where an opcode would take a value or a
// mark that is not there, or an argument runs past the end. An opcode
// libtorch does not know ends the walk: libtorch refuses it with an error.
// It reads r through a small buffer and skips the opcodes' arguments
// unread: its memory is the marks', not the pickle's.
func checkPickle(r io.Reader) error { return walkPickle(bufio.NewReader(r)) }

// walkPickle is checkPickle reading through br.
func walkPickle(br *bufio.Reader) error {
	p := pickleReader{r: br}
	depth := 0
	var marks []int
	for {
		at := p.off
		c, err := p.r.ReadByte()
		if err == io.EOF {
			return fmt.Errorf("no STOP")
		}
		if err != nil {
			return err
		}
		p.off++
		op, ok := pickleOps[c]
		if !ok {
			return nil
		}
		switch op.arg {
		case markOp:
			marks = append(marks, depth)
			continue
		case stopOp:
			if depth < 1 {
				return fmt.Errorf("STOP at byte %d with an empty stack", at)
			}
			return nil
		case argLine, argLine2:
			for range -op.arg {
				if err := p.skipLine(); err != nil {
					return pastTheEnd(err, "opcode 0x%02x at byte %d: its argument runs past the end", c, at)
				}
			}
		case argLen1, argLen4, argLen8:
			size := 1
			switch op.arg {
			case argLen4:
				size = 4
			case argLen8:
				size = 8
			}
			var b [8]byte
			if err := p.read(b[:size]); err != nil {
				return pastTheEnd(err, "opcode 0x%02x at byte %d: its length runs past the end", c, at)
			}
			l := binary.LittleEndian.Uint64(b[:])
			if err := p.skip(l); err != nil {
				return pastTheEnd(err, "opcode 0x%02x at byte %d: %d bytes, past the end", c, at, l)
			}
		default:
			if err := p.skip(uint64(op.arg)); err != nil {
				return pastTheEnd(err, "opcode 0x%02x at byte %d: its argument runs past the end", c, at)
			}
		}
		if op.toMark {
			if len(marks) == 0 {
				return fmt.Errorf("opcode 0x%02x at byte %d without a mark", c, at)
			}
			m := marks[len(marks)-1]
			marks = marks[:len(marks)-1]
			if m > depth || m < op.below {
				return fmt.Errorf("opcode 0x%02x at byte %d: its mark is not on the stack", c, at)
			}
			depth = m
		}
		if depth < op.need {
			return fmt.Errorf("opcode 0x%02x at byte %d takes %d values, the stack holds %d", c, at, op.need, depth)
		}
		depth += op.pushes - op.pops
	}
}

// pickleReader reads a pickle, counting its bytes.
type pickleReader struct {
	r   *bufio.Reader
	off int64
}

// read reads exactly len(b) bytes; io.ErrUnexpectedEOF if the pickle ends first.
func (p *pickleReader) read(b []byte) error {
	n, err := io.ReadFull(p.r, b)
	p.off += int64(n)
	return eofUnexpected(err)
}

// skip skips n bytes unread; io.ErrUnexpectedEOF if the pickle ends first.
func (p *pickleReader) skip(n uint64) error {
	for n > 0 {
		d, err := p.r.Discard(int(min(n, 1<<30)))
		p.off += int64(d)
		n -= uint64(d)
		if err != nil {
			return eofUnexpected(err)
		}
	}
	return nil
}

// skipLine skips past the next newline, however long the line;
// io.ErrUnexpectedEOF if the pickle ends first.
func (p *pickleReader) skipLine() error {
	for {
		line, err := p.r.ReadSlice('\n')
		p.off += int64(len(line))
		if err != bufio.ErrBufferFull {
			return eofUnexpected(err)
		}
	}
}

// pastTheEnd is the error of an opcode whose argument the pickle ends
// within (io.ErrUnexpectedEOF): the message format and args make; any
// other error, from reading, is returned as it is.
func pastTheEnd(err error, format string, args ...any) error {
	if err != io.ErrUnexpectedEOF {
		return err
	}
	return fmt.Errorf(format, args...)
}

// eofUnexpected turns io.EOF, the pickle ending within an opcode, into
// io.ErrUnexpectedEOF.
func eofUnexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
