package conf

import "testing"

func TestParseBucketURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want BucketURL
		str  string
	}{
		{"file:///srv/models", BucketURL{Scheme: "file", Dir: "/srv/models"}, "file:///srv/models"},
		{"file:///srv/models/", BucketURL{Scheme: "file", Dir: "/srv/models"}, "file:///srv/models"},
		{"file://localhost/srv", BucketURL{Scheme: "file", Dir: "/srv"}, "file:///srv"},
		{"file://./rel/dir", BucketURL{Scheme: "file", Dir: "rel/dir"}, "file://./rel/dir"},
		{"file://.", BucketURL{Scheme: "file", Dir: "."}, "file://./"},
		{"file://./.hidden", BucketURL{Scheme: "file", Dir: ".hidden"}, "file://./.hidden"},
		{"file://./a/../b", BucketURL{Scheme: "file", Dir: "b"}, "file://./b"},
		{"gs://bucket", BucketURL{Scheme: "gs", Bucket: "bucket"}, "gs://bucket/"},
		{"gs://bucket/", BucketURL{Scheme: "gs", Bucket: "bucket"}, "gs://bucket/"},
		{"gs://my-bucket.x/a/b", BucketURL{Scheme: "gs", Bucket: "my-bucket.x", Prefix: "a/b/"}, "gs://my-bucket.x/a/b/"},
	} {
		got, err := ParseBucketURL(tc.url)
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got != tc.want || got.String() != tc.str {
			t.Errorf("%s: got %+v (%s), want %+v (%s)", tc.url, got, got, tc.want, tc.str)
		}
	}
	for _, bad := range []string{"", "/srv/models", "s3://b", "file://models", "file://", "gs://", "gs://Bucket",
		"gs://b/a//c", "gs://b/../c", "gs://b?x=1", "gs://user@b", "file:rel", "gs://b#frag"} {
		if got, err := ParseBucketURL(bad); err == nil {
			t.Errorf("%q: got %+v, want an error", bad, got)
		}
	}
}
