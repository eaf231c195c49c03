package oip

import "github.com/groveml/grove/servables"

// errorText is err's message for an OIP caller: the datatypes of a request
// that does not fit the model's signature (servables.InputError) named as
// OIP names them (FP32, FP64, ...), not as the B&A API does.
func errorText(err error) string {
	return servables.Describe(err, oipName)
}

// oipName is the OIP name of dt, or its B&A name when OIP here has none.
func oipName(dt servables.DType) string {
	if name, ok := Datatype(dt); ok {
		return name
	}
	return dt.String()
}
