package main

import (
	"context"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/file"
	"github.com/groveml/grove/conf/bucket/gcs"
	"github.com/groveml/grove/conf/bucket/s3"
)

// bucketDrivers returns the bucket drivers this build has, one per URL
// scheme, configured from cfg. Adding a driver is one line here.
func bucketDrivers(cfg conf.Server) bucket.Drivers {
	return bucket.Drivers{
		file.Driver(),
		gcs.Driver(),
		s3.Driver(s3.WithEndpoint(cfg.S3Endpoint)),
	}
}

// openBucket opens the bucket cfg names with the driver of its scheme.
func openBucket(ctx context.Context, cfg conf.Server) (bucket.Bucket, error) {
	return bucketDrivers(cfg).Open(ctx, cfg.Bucket)
}
