package conf

import (
	"fmt"
	"net/url"
	"strings"
)

// ParseBucketURL checks the syntax every bucket URL shares, scheme://location
// with no user, query or fragment, and returns it parsed. What follows the
// scheme is the business of that scheme's bucket driver, which checks it
// when it opens the bucket.
func ParseBucketURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid bucket URL %q: %w", raw, err)
	}
	switch {
	case u.Scheme == "":
		return nil, fmt.Errorf("invalid bucket URL %q: no scheme; want scheme://location such as file:///abs/dir", raw)
	case !strings.HasPrefix(strings.ToLower(raw), u.Scheme+"://"):
		return nil, fmt.Errorf("invalid bucket URL %q: want %s://location, with two slashes", raw, u.Scheme)
	case u.User != nil:
		return nil, fmt.Errorf("invalid bucket URL %q: user information is not allowed (credentials come from the environment)", raw)
	case u.RawQuery != "" || u.ForceQuery:
		return nil, fmt.Errorf("invalid bucket URL %q: a query is not allowed", raw)
	case strings.Contains(raw, "#"): // url.Parse keeps no trace of an empty fragment
		return nil, fmt.Errorf("invalid bucket URL %q: a fragment is not allowed", raw)
	}
	return u, nil
}
