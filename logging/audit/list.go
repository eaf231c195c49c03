package audit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/groveml/grove/auth"
	"github.com/groveml/grove/conf/bucket"
	"github.com/groveml/grove/transport/httpserver"
)

// Limits of a listing.
const (
	// MaxListed is the most entries one listing returns: the oldest of
	// those since the time asked; Listing.Truncated says there are more.
	MaxListed = 1000
	// MaxObjectBytes is the largest audit object read; a larger one is
	// listed as unreadable.
	MaxObjectBytes = 1 << 20
	// readers is how many objects a listing reads at once.
	readers = 8
)

// Listing is the answer of GET /v1/audit.
type Listing struct {
	// Entries are the entries recorded at or after the time asked, oldest
	// first (newest last), by every replica.
	Entries []Entry `json:"entries"`
	// Truncated reports that more entries follow the last one: ask again
	// with since set to its time (entries of that very instant come again;
	// their ids tell them apart).
	Truncated bool `json:"truncated"`
	// Unreadable are the objects under the audit prefix, in the range
	// asked, that are not audit entries.
	Unreadable []Unreadable `json:"unreadable,omitempty"`
}

// Unreadable is an object of the audit prefix that could not be read as an entry.
type Unreadable struct {
	// Object is its name in the bucket.
	Object string `json:"object"`
	// Error says why.
	Error string `json:"error"`
}

// List returns the entries recorded at or after since (the zero time:
// all), oldest first, from every replica's objects in the bucket. Objects
// are ordered by name, which starts with their time; at most MaxListed
// are returned.
func (t *Trail) List(ctx context.Context, since time.Time) (Listing, error) {
	out := Listing{Entries: []Entry{}}
	if t.opts.Bucket == nil {
		return out, nil
	}
	objs, err := t.opts.Bucket.List(ctx, t.opts.Dir)
	if err != nil {
		return out, fmt.Errorf("listing the audit objects: %w", err)
	}
	var names []string
	for _, o := range objs {
		rel := strings.TrimPrefix(o.Name, t.opts.Dir)
		tm, ok := keyTime(rel)
		switch {
		case strings.HasPrefix(path.Base(rel), "."):
			// Not an entry: the file driver's lock files (".<name>.lock").
		case !ok:
			out.Unreadable = append(out.Unreadable, Unreadable{o.Name, "not an audit object name (<time>-<id>.json)"})
		case tm.Before(since):
		case o.Size > MaxObjectBytes:
			out.Unreadable = append(out.Unreadable, Unreadable{o.Name, fmt.Sprintf("%d bytes, more than the %d an entry may have", o.Size, MaxObjectBytes)})
		case len(names) == MaxListed:
			out.Truncated = true
		default:
			names = append(names, o.Name)
		}
	}
	entries := make([]Entry, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(readers, len(names)) {
		wg.Go(func() {
			for i := range next {
				data, _, err := t.opts.Bucket.ReadObject(ctx, names[i], MaxObjectBytes)
				if err == nil {
					entries[i], err = Decode(data)
				}
				errs[i] = err
			}
		})
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		switch {
		case err == nil:
			out.Entries = append(out.Entries, entries[i])
		case ctx.Err() != nil:
			return out, fmt.Errorf("reading the audit objects: %w", ctx.Err())
		case errors.Is(err, bucket.ErrNotExist):
			// Deleted since it was listed (a lifecycle rule): not an entry any more.
		default:
			out.Unreadable = append(out.Unreadable, Unreadable{names[i], err.Error()})
		}
	}
	return out, nil
}

// Decode reads an audit object. It checks that the object is one JSON
// object of an entry's shape with an id, a time, a caller, an API, a
// route and a result ("error" with its error); members it does not know
// are ignored, for the objects of newer versions.
func Decode(data []byte) (Entry, error) {
	var e Entry
	if !utf8.Valid(data) {
		return e, errors.New("audit entry: not valid UTF-8")
	}
	if err := json.Unmarshal(data, &e); err != nil {
		return Entry{}, fmt.Errorf("audit entry: %w", err)
	}
	var missing []string
	for _, f := range []struct{ name, v string }{{"id", e.ID}, {"who", e.Who}, {"api", e.API}, {"route", e.Route}, {"result", e.Result}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if e.Time.IsZero() {
		missing = append(missing, "time")
	}
	switch {
	case len(missing) > 0:
		return Entry{}, fmt.Errorf("audit entry: missing %s", strings.Join(missing, ", "))
	case e.Result != ResultOK && e.Result != ResultError:
		return Entry{}, fmt.Errorf("audit entry: result %q is not %q or %q", e.Result, ResultOK, ResultError)
	case e.Result == ResultError && e.Error == "":
		return Entry{}, errors.New(`audit entry: result "error" without its error`)
	}
	return e, nil
}

// ParseSince reads the since parameter of a listing's query: an RFC 3339
// time ("2026-11-25T03:00:00Z", with or without a fraction of a second);
// absent, the zero time (everything). Its errors name the parameter and
// what is wrong.
func ParseSince(q url.Values) (time.Time, error) {
	vs, ok := q["since"]
	switch {
	case !ok:
		return time.Time{}, nil
	case len(vs) > 1:
		return time.Time{}, errors.New(`query parameter "since" is given more than once`)
	case vs[0] == "":
		return time.Time{}, errors.New(`query parameter "since" is empty; give an RFC 3339 time such as 2026-11-25T03:00:00Z`)
	}
	tm, err := time.Parse(time.RFC3339Nano, vs[0])
	if err != nil {
		hint := ""
		if strings.Contains(vs[0], " ") {
			hint = ` (a "+" in a URL query reads as a space: write it %2B)`
		}
		return time.Time{}, fmt.Errorf("query parameter \"since\": %q is not an RFC 3339 time such as 2026-11-25T03:00:00Z%s", vs[0], hint)
	}
	return tm, nil
}

// Lister lists the entries recorded since a time; *Trail is one.
type Lister interface {
	List(ctx context.Context, since time.Time) (Listing, error)
}

// Register serves GET /v1/audit?since=<RFC 3339 time> on h from l: the
// Listing as JSON; a bad since is 400, a bucket that cannot be listed
// 503, both with {"error": "..."}, as its refusals (401, 403, 429) are
// (httpserver.JSONError). Its role is read.
func Register(h *httpserver.Server, l Lister) {
	h.SetErrorWriter("audit", httpserver.JSONError)
	h.Handle("GET /v1/audit", auth.RoleRead, "audit", func(w http.ResponseWriter, r *http.Request) {
		var since time.Time
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			err = fmt.Errorf("query: %w", err)
		} else {
			since, err = ParseSince(q)
		}
		if err != nil {
			httpserver.WriteJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
			return
		}
		out, err := l.List(r.Context(), since)
		if err != nil {
			httpserver.WriteJSON(w, http.StatusServiceUnavailable, map[string]string{"error": err.Error()})
			return
		}
		httpserver.WriteJSON(w, http.StatusOK, out)
	})
}
