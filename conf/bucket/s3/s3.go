// Package s3 is the bucket driver of s3:// URLs: an Amazon S3 bucket, or
// one of an S3-compatible store such as MinIO, through aws-sdk-go-v2.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/groveml/grove/conf/bucket"
)

// DefaultRegion is the region used when none is configured anywhere the
// SDK looks (AWS_REGION, the shared config file): S3-compatible stores
// need one to sign requests, and AWS redirects the SDK to the bucket's
// own region.
const DefaultRegion = "us-east-1"

// Option configures Open and Driver.
type Option func(*options)

type options struct {
	endpoint    string
	loadOptions []func(*config.LoadOptions) error
}

// WithEndpoint makes the buckets talk to the S3-compatible store at
// endpoint (a URL such as http://127.0.0.1:9000), with path-style
// addressing; "" leaves the endpoint to the SDK (AWS_ENDPOINT_URL,
// AWS_ENDPOINT_URL_S3, the shared config file, else AWS's own).
func WithEndpoint(endpoint string) Option {
	return func(o *options) { o.endpoint = endpoint }
}

// WithLoadOptions adds options to the SDK's config.LoadDefaultConfig, such
// as config.WithCredentialsProvider or config.WithHTTPClient.
func WithLoadOptions(opts ...func(*config.LoadOptions) error) Option {
	return func(o *options) { o.loadOptions = append(o.loadOptions, opts...) }
}

// Driver returns the driver of s3:// URLs, opening buckets with opts.
func Driver(opts ...Option) bucket.Driver {
	return bucket.Driver{Scheme: "s3", Open: func(ctx context.Context, rawURL string) (bucket.Bucket, error) {
		return Open(ctx, rawURL, opts...)
	}}
}

// ParseURL returns the bucket name and object name prefix of an
// s3://bucket[/prefix] URL. The prefix is a directory, empty or ending in
// "/": "s3://b/models" holds the object "models/x" as "x".
func ParseURL(raw string) (name, prefix string, err error) {
	return bucket.ParseNamedURL(raw, "s3", checkName)
}

// checkName checks a bucket name: 3 to 255 letters, digits, '.', '-' and
// '_', starting and ending with a letter or digit. S3's rules for new
// buckets are stricter (at most 63 characters, no uppercase letters or
// '_'); the store itself refuses a name it does not have.
func checkName(name string) error {
	if name == "" {
		return errors.New("no bucket name")
	}
	alnum := func(r byte) bool { return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' }
	for i := range len(name) {
		if r := name[i]; !alnum(r) && r != '.' && r != '-' && r != '_' {
			return fmt.Errorf("bucket name %q may only contain letters, digits, '.', '-' and '_'", name)
		}
	}
	if len(name) < 3 || len(name) > 255 || !alnum(name[0]) || !alnum(name[len(name)-1]) {
		return fmt.Errorf("bucket name %q must be 3 to 255 characters long and start and end with a letter or digit", name)
	}
	return nil
}

// Bucket is a bucket in S3 or an S3-compatible store. An object's version
// is its ETag.
type Bucket struct {
	bucket.Turns
	client   *awss3.Client
	name     string
	prefix   string
	pageSize int32 // ListObjectsV2's max-keys; 0: the store's default (1000 on S3)
}

// Open opens the s3:// bucket at rawURL with the SDK's default
// configuration: credentials from the standard chain (environment, shared
// config and credentials files, web identity as with IRSA, ECS, EC2
// instance metadata), the region from AWS_REGION or the shared config
// (DefaultRegion if neither has one), and the endpoint from WithEndpoint,
// else AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL or the shared config, else
// AWS's. When any of these sets an endpoint, addressing is path-style
// (http://endpoint/bucket/key), which S3-compatible stores expect. Open
// does not contact the store.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Bucket, error) {
	name, prefix, err := ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	b := &Bucket{name: name, prefix: prefix}
	cfg, err := config.LoadDefaultConfig(ctx, o.loadOptions...)
	if err != nil {
		return nil, fmt.Errorf("loading the AWS configuration for %s: %w", b, err)
	}
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	b.client = awss3.NewFromConfig(cfg, func(so *awss3.Options) {
		if o.endpoint != "" {
			so.BaseEndpoint = aws.String(o.endpoint)
		}
		so.UsePathStyle = so.BaseEndpoint != nil
		// Reads of objects written without a checksum (by most tools)
		// would each log a line saying that nothing was validated.
		so.DisableLogOutputChecksumValidationSkipped = true
	})
	return b, nil
}

// String returns the bucket's URL, s3://bucket/prefix/.
func (b *Bucket) String() string { return "s3://" + b.name + "/" + b.prefix }

// Close does nothing: the client holds nothing that needs releasing.
func (b *Bucket) Close() error { return nil }

// ReadObject returns the named object's content and attributes.
func (b *Bucket) ReadObject(ctx context.Context, name string, limit int64) ([]byte, bucket.Attrs, error) {
	out, err := b.get(ctx, name)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	defer out.Body.Close()
	data, err := bucket.ReadAll(out.Body, b, name, limit)
	if err != nil {
		return nil, bucket.Attrs{}, err
	}
	if aws.ToString(out.ETag) == "" {
		return nil, bucket.Attrs{}, fmt.Errorf("reading %s from %s: the store answered without an ETag, the object's version", name, b)
	}
	return data, bucket.Attrs{Version: aws.ToString(out.ETag), ModTime: aws.ToTime(out.LastModified), Size: int64(len(data))}, nil
}

// Open returns a reader of the named object.
func (b *Bucket) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	out, err := b.get(ctx, name)
	if err != nil {
		return nil, err
	}
	return out.Body, nil
}

func (b *Bucket) get(ctx context.Context, name string) (*awss3.GetObjectOutput, error) {
	if name == "" {
		return nil, fmt.Errorf("invalid object name %q", name)
	}
	out, err := b.client.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(b.name), Key: aws.String(b.prefix + name)})
	if isNoSuchKey(err) {
		return nil, fmt.Errorf("%w: %s in %s", bucket.ErrNotExist, name, b)
	}
	if err != nil {
		return nil, fmt.Errorf("object %s in %s: %w", name, b, err)
	}
	return out, nil
}

// List returns the objects whose names start with prefix, sorted; it reads
// every page of the listing.
func (b *Bucket) List(ctx context.Context, prefix string) ([]bucket.Object, error) {
	in := &awss3.ListObjectsV2Input{Bucket: aws.String(b.name), Prefix: aws.String(b.prefix + prefix)}
	if b.pageSize > 0 {
		in.MaxKeys = aws.Int32(b.pageSize)
	}
	var out []bucket.Object
	for pages := awss3.NewListObjectsV2Paginator(b.client, in); pages.HasMorePages(); {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing %q in %s: %w", prefix, b, err)
		}
		for _, o := range page.Contents {
			out = append(out, bucket.Object{Name: strings.TrimPrefix(aws.ToString(o.Key), b.prefix), Size: aws.ToInt64(o.Size)})
		}
	}
	slices.SortFunc(out, func(x, y bucket.Object) int { return strings.Compare(x.Name, y.Name) })
	return out, nil
}

// isNoSuchKey reports whether err is S3's answer for a missing key (and
// not, say, for a missing bucket, which is not a missing object).
func isNoSuchKey(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "NoSuchKey":
		return true
	case "NotFound": // a HEAD answer has no body, so no error code but this one
		var re *smithyhttp.ResponseError
		return errors.As(err, &re) && re.HTTPStatusCode() == http.StatusNotFound
	}
	return false
}
