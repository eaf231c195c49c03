package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/groveml/grove/transport/tlsconf"
)

// tokenEnv holds the bearer token when --token is not given, so that it
// need not appear in the process list.
const tokenEnv = "GROVE_TOKEN"

// serverClient is how a command reaches a running Grove: the credentials
// and TLS settings of its --token, --ca, --cert and --key flags.
type serverClient struct {
	token, ca, cert, key string
}

// flags defines --token, --ca, --cert and --key on fs.
func (c *serverClient) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.token, "token", "", "bearer `token` sent to the server (default: $"+tokenEnv+")")
	fs.StringVar(&c.ca, "ca", "", "PEM `file` of the CAs that sign the server's certificate (default: the system's)")
	fs.StringVar(&c.cert, "cert", "", "PEM client certificate `file`, for a server that asks for one (mTLS); with --key")
	fs.StringVar(&c.key, "key", "", "PEM `file` of the --cert key")
}

// httpClient returns an HTTP client with the flags' TLS settings; the
// errors name the flag at fault.
func (c *serverClient) httpClient(timeout time.Duration) (*http.Client, error) {
	if (c.cert == "") != (c.key == "") {
		return nil, errors.New("--cert and --key go together: give both or neither")
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.ca != "" {
		pem, err := tlsconf.ReadFile(c.ca)
		if err != nil {
			return nil, fmt.Errorf("--ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca: %s holds no PEM certificate", c.ca)
		}
		tc.RootCAs = pool
	}
	if c.cert != "" {
		pair, err := tlsconf.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("--cert and --key: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = tc
	return &http.Client{Timeout: timeout, Transport: tr, CheckRedirect: sameOrigin}, nil
}

// sameOrigin follows a redirect only to the scheme and host:port of the
// first request: net/http keeps the Authorization header on a redirect
// to the same host name whatever its scheme and port, so an answer that
// sent the client from https to http (or another port) would carry the
// bearer token in the clear.
func sameOrigin(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case len(via) >= 10:
		return errors.New("stopped after 10 redirects")
	case req.URL.Scheme != first.Scheme || req.URL.Host != first.Host:
		return fmt.Errorf("redirected from %s://%s to %s://%s: not followed, the credentials are only sent to the --url given",
			first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	}
	return nil
}

// authorize adds the bearer token, if any, to req.
func (c *serverClient) authorize(req *http.Request) {
	tok := c.token
	if tok == "" {
		tok = os.Getenv(tokenEnv)
	}
	if tok = strings.TrimSpace(tok); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
}
