package grpcserver

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// RetryPushbackKey is the trailer of gRFC A6's server pushback: in how
// many milliseconds (decimal) the client may retry the call that failed.
// A grpc-go client whose retry policy lists the call's status code among
// its retryableStatusCodes waits that long instead of its own backoff.
const RetryPushbackKey = "grpc-retry-pushback-ms"

// SetRetryPushback sets the RetryPushbackKey trailer of the server call of
// ctx to d (in whole milliseconds): the protocols set it where their REST
// answer to the same failure has a Retry-After header. Call it once, on a
// unary call that fails: a client retries no call whose trailer holds the
// key twice, nor one that sent a message before it failed. A negative d
// (which gRFC A6 reads as "do not retry") or a ctx of no server call sets
// nothing.
func SetRetryPushback(ctx context.Context, d time.Duration) {
	if d < 0 {
		return
	}
	_ = grpc.SetTrailer(ctx, metadata.Pairs(RetryPushbackKey, strconv.FormatInt(d.Milliseconds(), 10)))
}
