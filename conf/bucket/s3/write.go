package s3

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/groveml/grove/conf/bucket"
)

// writeIDKey is the user metadata key (x-amz-meta-grove-write-id) under
// which WriteObject tags each version it writes, to recognise its own
// write behind a precondition failure.
const writeIDKey = "grove-write-id"

// WriteObject replaces the named object's content with data if the object
// is at version ifVersion ("": if it does not exist); see bucket.Writer.
// It is one PutObject with If-Match: ifVersion (the ETag read), or with
// If-None-Match: * to create. The store's answer when the condition does
// not hold, HTTP 412 PreconditionFailed (or 404 NoSuchKey, which a store
// may give to If-Match on a missing object), and its answer to a
// conditional write that raced another, HTTP 409 ConditionalRequestConflict
// (or OperationAborted), wrap bucket.ErrConflict, so that bucket.Update
// reads again and retries.
//
// The SDK retries a PutObject after a transient error. If the first
// attempt was applied but its answer lost, the retry fails its
// precondition against the version the first attempt wrote; to tell that
// from a real conflict, each version carries a random write ID in its
// metadata, and a failed precondition whose current version has ours is a
// success.
//
// PutObject's answer has the new ETag but no modification time: the
// returned ModTime is the answer's Date, the store's clock when it wrote.
func (b *Bucket) WriteObject(ctx context.Context, name string, data []byte, ifVersion string) (bucket.Attrs, error) {
	if name == "" {
		return bucket.Attrs{}, fmt.Errorf("writing to %s: invalid object name %q", b, name)
	}
	var id [16]byte
	rand.Read(id[:])
	writeID := hex.EncodeToString(id[:])
	in := &awss3.PutObjectInput{
		Bucket:        aws.String(b.name),
		Key:           aws.String(b.prefix + name),
		Body:          bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
		Metadata:      map[string]string{writeIDKey: writeID},
	}
	if ifVersion == "" {
		in.IfNoneMatch = aws.String("*")
	} else {
		in.IfMatch = aws.String(ifVersion)
	}
	out, err := b.client.PutObject(ctx, in)
	if err == nil {
		if aws.ToString(out.ETag) == "" {
			return bucket.Attrs{}, fmt.Errorf("writing %s to %s: the store answered without an ETag, the new version", name, b)
		}
		return bucket.Attrs{Version: aws.ToString(out.ETag), ModTime: answerDate(out.ResultMetadata), Size: int64(len(data))}, nil
	}
	if !isConflict(err, ifVersion != "") {
		return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w", name, b, err)
	}
	head, herr := b.client.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: in.Bucket, Key: in.Key})
	if herr == nil && head.Metadata[writeIDKey] == writeID && aws.ToString(head.ETag) != "" {
		return bucket.Attrs{Version: aws.ToString(head.ETag), ModTime: aws.ToTime(head.LastModified), Size: aws.ToInt64(head.ContentLength)}, nil
	}
	want := "not to exist"
	if ifVersion != "" {
		want = "to be at ETag " + ifVersion
	}
	return bucket.Attrs{}, fmt.Errorf("writing %s to %s: %w: the write required it %s: %v", name, b, bucket.ErrConflict, want, err)
}

// isConflict reports whether err is a conditional PutObject's failed
// precondition (ifMatch: the write had If-Match) or lost race.
func isConflict(err error, ifMatch bool) bool {
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) {
		return false
	}
	var ae smithy.APIError
	code := ""
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	switch re.HTTPStatusCode() {
	case http.StatusPreconditionFailed:
		return true
	case http.StatusConflict:
		return code == "ConditionalRequestConflict" || code == "OperationAborted"
	case http.StatusNotFound:
		return ifMatch && code == "NoSuchKey"
	}
	return false
}

// answerDate returns the Date of the HTTP answer an operation's metadata
// holds, or the local time if it has none.
func answerDate(md middleware.Metadata) time.Time {
	if resp, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok {
		if t, err := http.ParseTime(resp.Header.Get("Date")); err == nil {
			return t
		}
	}
	return time.Now()
}
