package listener

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const procTCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:08AE 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0000000000000000 100 0 0 10 0
   1: 00000000:08AF 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2 1 0000000000000000 100 0 0 10 0
   2: 0100007F:08AF 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 3 1 0000000000000000 100 0 0 10 0
`

const procTCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:08AE 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 4 1 0000000000000000 100 0 0 10 0
   1: 00000000000000000000000000000000:08B0 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
`

func writeProc(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"tcp": procTCP, "tcp6": procTCP6} {
		if err := os.WriteFile(filepath.Join(dir, "net", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestCheckLoopbackFromProc(t *testing.T) {
	c := Checker{ProcDir: writeProc(t), GOOS: "linux"}
	tests := []struct {
		port int
		want error
		text string
	}{
		{2222, nil, ""},                        // 127.0.0.1 and ::1
		{2223, ErrNotLoopback, "0.0.0.0:2223"}, // established 127.0.0.1 line ignored
		{2224, ErrNotLoopback, "[::]:2224"},    // IPv6 wildcard
		{2225, ErrNoListener, "port 2225"},     // nothing
	}
	for _, tt := range tests {
		err := c.CheckLoopback(context.Background(), tt.port)
		if !errors.Is(err, tt.want) || (err != nil && !strings.Contains(err.Error(), tt.text)) {
			t.Errorf("port %d: %v; want %v mentioning %q", tt.port, err, tt.want, tt.text)
		}
	}
}

func TestCheckLoopbackFromLsof(t *testing.T) {
	out := "p123\nf5\nn127.0.0.1:2222\nf6\nn[::1]:2222\np9\nf3\nn*:2223\n"
	c := Checker{GOOS: "darwin", Lsof: func(_ context.Context, args ...string) ([]byte, error) {
		if strings.Join(args, " ") != "-nP -F n -iTCP:"+args[3][len("-iTCP:"):]+" -sTCP:LISTEN" {
			t.Errorf("lsof args %q", args)
		}
		return []byte(out), nil
	}}
	if err := c.CheckLoopback(context.Background(), 2222); err != nil {
		t.Errorf("2222: %v", err)
	}
	if err := c.CheckLoopback(context.Background(), 2223); !errors.Is(err, ErrNotLoopback) {
		t.Errorf("2223: %v", err)
	}
}

// TestCheckLoopbackLive binds real sockets: loopback passes, the wildcard
// address fails.
func TestCheckLoopbackLive(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	if err := (Checker{}).CheckLoopback(context.Background(), port); err != nil {
		t.Fatalf("loopback listener: %v", err)
	}
	wide, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer wide.Close()
	wport := wide.Addr().(*net.TCPAddr).Port
	err = (Checker{}).CheckLoopback(context.Background(), wport)
	if !errors.Is(err, ErrNotLoopback) || !strings.Contains(err.Error(), "0.0.0.0:"+strconv.Itoa(wport)) {
		t.Fatalf("wildcard listener: %v", err)
	}
}

func FuzzParseProcNet(f *testing.F) {
	f.Add([]byte(procTCP), 2222)
	f.Add([]byte(procTCP6), 2224)
	f.Fuzz(func(t *testing.T, b []byte, port int) {
		if ss, err := listenSockets(b, port); err == nil {
			for _, s := range ss {
				if s.uid < 0 || s.inode == "" {
					t.Fatalf("bad socket %+v", s)
				}
			}
		}
		addrs, err := ParseProcNet(b, port)
		if err != nil {
			return
		}
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); err != nil {
				t.Fatalf("bad address %q", a)
			}
		}
	})
}
