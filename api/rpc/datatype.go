package rpc

import (
	"fmt"
	"strings"

	"github.com/groveml/grove/servables"
)

// oipTypes maps Grove's tensor types to OIP datatype names.
var oipTypes = map[servables.DType]string{
	servables.Float32: "FP32", servables.Float64: "FP64",
	servables.Int8: "INT8", servables.Int16: "INT16", servables.Int32: "INT32", servables.Int64: "INT64",
}

func oipDatatype(dt servables.DType) string {
	if s, ok := oipTypes[dt]; ok {
		return s
	}
	return "UNKNOWN"
}

func parseOIPDatatype(s string) (servables.DType, error) {
	for dt, name := range oipTypes {
		if name == s {
			return dt, nil
		}
	}
	return servables.Unknown, fmt.Errorf("datatype %q is not supported; the supported datatypes are FP32, FP64, INT8, INT16, INT32 and INT64", strings.ToUpper(s))
}
