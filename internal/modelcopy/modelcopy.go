// Package modelcopy makes copies of a model file that are models of their
// own: the same weights and answers, but each its own content and
// checksum, as the models of a fleet are. Grove's density proofs and
// benchmarks serve many such copies, so that nothing a runtime keeps by
// content (ONNX's InfoCache) is shared between them.
package modelcopy

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Distinct returns copy i of the model file name (a TorchScript archive,
// .pt, or an ONNX model, .onnx) whose content is data. A TorchScript
// archive gets an extra file, <archive>/extra/grove_copy holding i, which
// torch.jit.load allows and ignores; an ONNX model gets a metadata_props
// entry grove_copy = i, appended to its protobuf as the format allows.
func Distinct(name string, data []byte, i int) ([]byte, error) {
	switch path.Ext(name) {
	case ".onnx":
		var entry []byte
		entry = protowire.AppendTag(entry, 1, protowire.BytesType)
		entry = protowire.AppendString(entry, "grove_copy")
		entry = protowire.AppendTag(entry, 2, protowire.BytesType)
		entry = protowire.AppendString(entry, strconv.Itoa(i))
		out := protowire.AppendTag(bytes.Clone(data), onnxMetadataProps, protowire.BytesType)
		return protowire.AppendBytes(out, entry), nil
	case ".pt":
		r, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("copying %s: %w", name, err)
		}
		if len(r.File) == 0 {
			return nil, fmt.Errorf("copying %s: an empty archive", name)
		}
		var out bytes.Buffer
		w := zip.NewWriter(&out)
		for _, f := range r.File {
			if err := w.Copy(f); err != nil {
				return nil, fmt.Errorf("copying %s: %w", name, err)
			}
		}
		archive, _, _ := strings.Cut(r.File[0].Name, "/")
		fw, err := w.CreateHeader(&zip.FileHeader{Name: archive + "/extra/grove_copy", Method: zip.Store})
		if err == nil {
			_, err = fmt.Fprint(fw, i)
		}
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			return nil, fmt.Errorf("copying %s: %w", name, err)
		}
		return out.Bytes(), nil
	}
	return nil, errors.New("modelcopy: " + name + " is neither a TorchScript archive (.pt) nor an ONNX model (.onnx)")
}

// onnxMetadataProps is the field number of ModelProto.metadata_props.
const onnxMetadataProps = 14
