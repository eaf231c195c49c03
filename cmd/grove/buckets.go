package main

import (
	"context"

	"github.com/groveml/grove/conf"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/conf/bucket/drivers"
)

// bucketDrivers returns the bucket drivers this build has, one per URL
// scheme (drivers.Builtin), configured from cfg.
func bucketDrivers(cfg conf.Server) bucket.Drivers {
	return drivers.Builtin(cfg.S3Endpoint)
}

// openBucket opens the bucket cfg names with the driver of its scheme.
func openBucket(ctx context.Context, cfg conf.Server) (bucket.Bucket, error) {
	return bucketDrivers(cfg).Open(ctx, cfg.Bucket)
}
