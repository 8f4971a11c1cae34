// Package download fetches files over HTTPS and checks their SHA-256 before
// anyone may use them: the bytes land in a temp file next to the cache, are
// hashed while they are written, fsynced, and only a file whose digest
// matches is renamed to its place in the cache, named by that digest. A
// mismatch deletes the download. Requests have connect and total timeouts and
// are retried a bounded number of times with backoff.
package download

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/shared/atomicfile"
)

// ErrDigestMismatch is returned when downloaded bytes do not hash to the
// expected digest; the download has been deleted.
var ErrDigestMismatch = errors.New("sha256 mismatch")

// ErrNotHTTPS is returned for any address, or redirect, that is not https.
var ErrNotHTTPS = errors.New("only https downloads are allowed")

// Status says where a verified file came from.
type Status string

// The statuses of a Fetch.
const (
	StatusDownloaded Status = "downloaded"
	StatusCached     Status = "cached"
)

// Result is a verified file in the cache.
type Result struct {
	Path   string
	SHA256 string
	Size   int64
	Status Status
}

// Options tune a Client; zero fields take the documented defaults.
type Options struct {
	// CacheDir holds verified files named by their digest. Required.
	CacheDir string
	// RootCAs replaces the system roots; only tests set it, to trust a
	// loopback test server.
	RootCAs *x509.CertPool
	// ConnectTimeout bounds dialing and the TLS handshake (default 15s).
	ConnectTimeout time.Duration
	// TotalTimeout bounds one attempt from request to last byte (default 10m).
	TotalTimeout time.Duration
	// Attempts is how many times a transient failure is tried (default 5).
	Attempts int
	// Backoff is the first wait between attempts; it doubles (default 2s).
	Backoff time.Duration
	// MaxBytes refuses larger downloads (default 1 GiB).
	MaxBytes int64
	// Sleep waits between attempts; tests make it instant.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client downloads and verifies files.
type Client struct {
	opts Options
	http *http.Client
}

// New returns a Client for opts.
func New(opts Options) *Client {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 15 * time.Second
	}
	if opts.TotalTimeout <= 0 {
		opts.TotalTimeout = 10 * time.Minute
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff <= 0 {
		opts.Backoff = 2 * time.Second
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 30
	}
	if opts.Sleep == nil {
		opts.Sleep = Sleep
	}
	dialer := &net.Dialer{Timeout: opts.ConnectTimeout}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   opts.ConnectTimeout,
		ResponseHeaderTimeout: opts.TotalTimeout,
		TLSClientConfig:       &tls.Config{RootCAs: opts.RootCAs, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:     true,
	}
	hc := &http.Client{
		Transport: tr,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" {
				return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), ErrNotHTTPS)
			}
			if len(via) >= 10 {
				return errors.New("too many redirects")
			}
			return nil
		},
	}
	return &Client{opts: opts, http: hc}
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// Fetch returns the cached file for digest, downloading it from rawURL when
// it is not cached yet. The returned file has been verified.
func (c *Client) Fetch(ctx context.Context, rawURL, digest string) (Result, error) {
	digest = strings.ToLower(digest)
	if !hexDigest.MatchString(digest) {
		return Result{}, fmt.Errorf("downloading %s: expected sha256 %q is not 64 hex digits", rawURL, digest)
	}
	if err := checkHTTPS(rawURL); err != nil {
		return Result{}, err
	}
	if err := os.MkdirAll(c.opts.CacheDir, 0o700); err != nil {
		return Result{}, fmt.Errorf("creating download cache: %w", err)
	}
	path := filepath.Join(c.opts.CacheDir, digest)
	if r, ok := c.cached(path, digest); ok {
		return r, nil
	}
	var last error
	for attempt := 1; attempt <= c.opts.Attempts; attempt++ {
		if attempt > 1 {
			if err := c.opts.Sleep(ctx, c.opts.Backoff<<(attempt-2)); err != nil {
				return Result{}, fmt.Errorf("downloading %s: %w", rawURL, err)
			}
		}
		size, err := c.once(ctx, rawURL, path, digest)
		if err == nil {
			return Result{Path: path, SHA256: digest, Size: size, Status: StatusDownloaded}, nil
		}
		last = err
		if !retryable(err) {
			break
		}
	}
	return Result{}, last
}

// cached reports a cache entry whose content still hashes to digest; a
// corrupt entry is removed.
func (c *Client) cached(path, digest string) (Result, bool) {
	f, err := os.Open(path)
	if err != nil {
		return Result{}, false
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil || hex.EncodeToString(h.Sum(nil)) != digest {
		_ = os.Remove(path)
		return Result{}, false
	}
	return Result{Path: path, SHA256: digest, Size: n, Status: StatusCached}, true
}

// once makes one attempt: download into a temp file, hash it, and rename it
// into the cache only when the digest matches.
func (c *Client) once(ctx context.Context, rawURL, path, digest string) (int64, error) {
	var size int64
	var got string
	err := atomicfile.WriteFrom(path, func(w io.Writer) error {
		h := sha256.New()
		n, err := c.get(ctx, rawURL, io.MultiWriter(w, h))
		if err != nil {
			return err
		}
		size, got = n, hex.EncodeToString(h.Sum(nil))
		if got != digest {
			return fmt.Errorf("downloading %s: %w: got %s, want %s; the download was deleted", rawURL, ErrDigestMismatch, got, digest)
		}
		return nil
	}, 0o600)
	if err != nil {
		return 0, err
	}
	return size, nil
}

// Get fetches a small document (at most limit bytes) that is verified by
// other means, such as a checksum list, with the same retries.
func (c *Client) Get(ctx context.Context, rawURL string, limit int64) ([]byte, error) {
	if err := checkHTTPS(rawURL); err != nil {
		return nil, err
	}
	var last error
	for attempt := 1; attempt <= c.opts.Attempts; attempt++ {
		if attempt > 1 {
			if err := c.opts.Sleep(ctx, c.opts.Backoff<<(attempt-2)); err != nil {
				return nil, fmt.Errorf("downloading %s: %w", rawURL, err)
			}
		}
		var b strings.Builder
		lw := &limitWriter{w: &b, left: limit}
		if _, err := c.get(ctx, rawURL, lw); err != nil {
			last = err
			if !retryable(err) {
				break
			}
			continue
		}
		return []byte(b.String()), nil
	}
	return nil, last
}

// get streams one response body into w.
func (c *Client) get(ctx context.Context, rawURL string, w io.Writer) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.TotalTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, fmt.Errorf("downloading %s: %w", rawURL, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, &transientError{fmt.Errorf("downloading %s: %w", rawURL, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		err := fmt.Errorf("downloading %s: server answered %s", rawURL, resp.Status)
		if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusRequestTimeout {
			return 0, &transientError{err}
		}
		return 0, err
	}
	n, err := io.Copy(w, io.LimitReader(resp.Body, c.opts.MaxBytes+1))
	if err != nil {
		var le *limitError
		if errors.As(err, &le) {
			return n, fmt.Errorf("downloading %s: %w", rawURL, err)
		}
		return n, &transientError{fmt.Errorf("downloading %s: %w", rawURL, err)}
	}
	if n > c.opts.MaxBytes {
		return n, fmt.Errorf("downloading %s: larger than %d bytes", rawURL, c.opts.MaxBytes)
	}
	return n, nil
}

// transientError marks failures worth another attempt.
type transientError struct{ err error }

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

func retryable(err error) bool {
	var te *transientError
	return errors.As(err, &te) && !errors.Is(err, ErrNotHTTPS) && !errors.Is(err, context.Canceled)
}

type limitError struct{ limit int64 }

func (e *limitError) Error() string { return fmt.Sprintf("larger than %d bytes", e.limit) }

// limitWriter refuses writes past its budget.
type limitWriter struct {
	w    io.Writer
	left int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > l.left {
		return 0, &limitError{l.left}
	}
	l.left -= int64(len(p))
	return l.w.Write(p)
}

func checkHTTPS(rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("downloading %q: %w", rawURL, err)
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("downloading %s: %w", u.Redacted(), ErrNotHTTPS)
	}
	return nil
}

// Sleep waits for d or until ctx is done, then returns ctx's error; it is
// the default Options.Sleep (and provision's retry pause).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
