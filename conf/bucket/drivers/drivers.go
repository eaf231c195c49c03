// Package drivers lists the bucket drivers Grove is built with, one per
// URL scheme: the one registration line a new driver adds, read by both
// programs that open buckets (cmd/grove and the DeepRec processor
// library).
package drivers

import (
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/conf/bucket/gcs"
	"github.com/groveml/grove/conf/bucket/s3"
)

// Builtin returns the drivers of this build. s3Endpoint, if set, is the
// endpoint of an S3-compatible store (MinIO) the s3:// driver calls
// instead of Amazon's.
func Builtin(s3Endpoint string) bucket.Drivers {
	return bucket.Drivers{
		file.Driver(),
		gcs.Driver(),
		s3.Driver(s3.WithEndpoint(s3Endpoint)),
	}
}
