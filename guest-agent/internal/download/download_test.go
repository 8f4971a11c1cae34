package download

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// server serves handler over TLS on loopback and returns a client trusting it.
func server(t *testing.T, handler http.HandlerFunc, opts Options) (*httptest.Server, *Client, *[]time.Duration) {
	t.Helper()
	srv := httptest.NewTLSServer(handler)
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	var sleeps []time.Duration
	opts.RootCAs = pool
	if opts.CacheDir == "" {
		opts.CacheDir = filepath.Join(t.TempDir(), "cache")
	}
	opts.Sleep = func(_ context.Context, d time.Duration) error { sleeps = append(sleeps, d); return nil }
	return srv, New(opts), &sleeps
}

func cacheEntries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestFetchVerifiesAndCaches(t *testing.T) {
	body := []byte("artifact bytes")
	var hits atomic.Int32
	cache := filepath.Join(t.TempDir(), "cache")
	srv, c, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write(body)
	}, Options{CacheDir: cache})
	want := digestOf(body)
	r, err := c.Fetch(t.Context(), srv.URL+"/a.tar.gz", want)
	if err != nil || r.Status != StatusDownloaded || r.Size != int64(len(body)) {
		t.Fatalf("first fetch: %+v, %v", r, err)
	}
	got, err := os.ReadFile(r.Path)
	if err != nil || string(got) != string(body) || filepath.Base(r.Path) != want {
		t.Fatalf("cached file %s: %q, %v", r.Path, got, err)
	}
	if fi, _ := os.Stat(r.Path); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	r, err = c.Fetch(t.Context(), srv.URL+"/a.tar.gz", strings.ToUpper(want))
	if err != nil || r.Status != StatusCached || hits.Load() != 1 {
		t.Fatalf("second fetch: %+v, %v, %d hits; want cached with 1 hit", r, err, hits.Load())
	}
	// A corrupted cache entry is not trusted: it is fetched again.
	if err := os.WriteFile(r.Path, []byte("tampered"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err = c.Fetch(t.Context(), srv.URL+"/a.tar.gz", want)
	if err != nil || r.Status != StatusDownloaded || hits.Load() != 2 {
		t.Fatalf("after tampering: %+v, %v, %d hits", r, err, hits.Load())
	}
}

func TestFetchMismatchDeletesDownload(t *testing.T) {
	var hits atomic.Int32
	cache := filepath.Join(t.TempDir(), "cache")
	srv, c, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("evil bytes"))
	}, Options{CacheDir: cache})
	want := digestOf([]byte("good bytes"))
	_, err := c.Fetch(t.Context(), srv.URL+"/a", want)
	if !errors.Is(err, ErrDigestMismatch) || !strings.Contains(err.Error(), digestOf([]byte("evil bytes"))) {
		t.Fatalf("got %v, want a mismatch naming both digests", err)
	}
	if hits.Load() != 1 {
		t.Errorf("a mismatch was retried %d times; it must fail at once", hits.Load())
	}
	if ents := cacheEntries(t, cache); len(ents) != 0 {
		t.Fatalf("cache holds %v after a mismatch; want nothing", ents)
	}
}

func TestFetchRetriesTransientFailures(t *testing.T) {
	body := []byte("eventually")
	tests := []struct {
		name      string
		failures  int32
		status    int
		attempts  int
		wantErr   string
		wantHits  int32
		wantSleep []time.Duration
	}{
		{"recovers after two 503s", 2, http.StatusServiceUnavailable, 5, "", 3, []time.Duration{time.Second, 2 * time.Second}},
		{"gives up after the bounded attempts", 99, http.StatusBadGateway, 3, "502 Bad Gateway", 3, []time.Duration{time.Second, 2 * time.Second}},
		{"404 is not retried", 99, http.StatusNotFound, 5, "404 Not Found", 1, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hits atomic.Int32
			srv, c, sleeps := server(t, func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) <= tt.failures {
					w.WriteHeader(tt.status)
					return
				}
				_, _ = w.Write(body)
			}, Options{Attempts: tt.attempts, Backoff: time.Second})
			_, err := c.Fetch(t.Context(), srv.URL+"/x", digestOf(body))
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("got %v, want error %q", err, tt.wantErr)
			}
			if hits.Load() != tt.wantHits {
				t.Errorf("%d requests, want %d", hits.Load(), tt.wantHits)
			}
			if len(*sleeps) != len(tt.wantSleep) {
				t.Fatalf("slept %v, want %v", *sleeps, tt.wantSleep)
			}
			for i := range tt.wantSleep {
				if (*sleeps)[i] != tt.wantSleep[i] {
					t.Errorf("sleep %d: %v, want %v", i, (*sleeps)[i], tt.wantSleep[i])
				}
			}
		})
	}
}

func TestRefusesAnythingButHTTPS(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("x")) }))
	defer plain.Close()
	srv, c, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/x", http.StatusFound)
	}, Options{})
	d := digestOf([]byte("x"))
	for _, u := range []string{plain.URL + "/x", "ftp://127.0.0.1/x", "https:///nohost", srv.URL + "/redirect"} {
		if _, err := c.Fetch(t.Context(), u, d); !errors.Is(err, ErrNotHTTPS) {
			t.Errorf("%s: got %v, want ErrNotHTTPS", u, err)
		}
	}
	if _, err := c.Get(t.Context(), plain.URL, 10); !errors.Is(err, ErrNotHTTPS) {
		t.Errorf("Get over http: %v", err)
	}
}

func TestUntrustedCertificateFails(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := New(Options{CacheDir: t.TempDir(), Attempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }})
	_, err := c.Fetch(t.Context(), srv.URL, digestOf(nil))
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("got %v, want a certificate error", err)
	}
}

func TestTimeoutsAreBounded(t *testing.T) {
	release := make(chan struct{})
	srv, c, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}, Options{TotalTimeout: 50 * time.Millisecond, Attempts: 2})
	defer close(release)
	_, err := c.Fetch(t.Context(), srv.URL, digestOf(nil))
	if err == nil || !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("got %v, want a timeout", err)
	}
}

func TestBadDigestArgument(t *testing.T) {
	c := New(Options{CacheDir: t.TempDir()})
	if _, err := c.Fetch(t.Context(), "https://127.0.0.1/x", "abc"); err == nil || !strings.Contains(err.Error(), "64 hex") {
		t.Fatalf("got %v", err)
	}
}

func TestGetLimit(t *testing.T) {
	srv, c, _ := server(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("0123456789"))
	}, Options{})
	if b, err := c.Get(t.Context(), srv.URL, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("got %q, %v", b, err)
	}
	if _, err := c.Get(t.Context(), srv.URL, 5); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("over the limit: %v", err)
	}
}

// benchServer serves 8 MiB over loopback TLS and returns a client for it.
func benchServer(b *testing.B) (*Client, string, []byte, string) {
	body := make([]byte, 8<<20)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	b.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	cache := b.TempDir()
	return New(Options{CacheDir: cache, RootCAs: pool}), srv.URL, body, cache
}

// BenchmarkFetchVerify is a full verified download: hashing, temp file,
// fsync, rename into the cache.
func BenchmarkFetchVerify(b *testing.B) {
	c, url, body, cache := benchServer(b)
	d := digestOf(body)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := c.Fetch(b.Context(), url, d); err != nil {
			b.Fatal(err)
		}
		if err := os.Remove(filepath.Join(cache, d)); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPlainGet is the baseline: the same transfer over the same
// client, discarded, with no hashing, file, fsync or rename.
func BenchmarkPlainGet(b *testing.B) {
	c, url, body, _ := benchServer(b)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := c.get(b.Context(), url, io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}
