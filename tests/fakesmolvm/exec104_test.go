package main

import (
	"bytes"
	"context"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSingleLoopExec models 1.0.4's `machine exec -i`: a command that
// writes output before it reads its large input stalls both loops and the
// exec fails with 1.0.4's EAGAIN error after the send timeout (1 s here);
// a command that reads all its input before writing works.
func TestSingleLoopExec(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name, script string
		wantErr      string
		wantOut      int
	}{
		{"output while input flows", "head -c 1048576 /dev/zero; cat >/dev/null", "Resource temporarily unavailable (os error 11)", 0},
		{"input first, then output", "cat >/dev/null; head -c 1048576 /dev/zero", "", mib},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", tt.script)
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			var out, errs bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code, err := runSingleLoop(ctx, cmd, bytes.NewReader(make([]byte, 4*mib)), &out, &errs, time.Second)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("status %d, error %v; want %q", code, err, tt.wantErr)
				}
				return
			}
			if err != nil || code != 0 || out.Len() != tt.wantOut {
				t.Fatalf("status %d, error %v, %d bytes out (stderr %q); want 0, nil, %d", code, err, out.Len(), errs.String(), tt.wantOut)
			}
		})
	}
}

// TestSingleLoopExecStatus: the command's exit status comes back.
func TestSingleLoopExecStatus(t *testing.T) {
	cmd := exec.Command("/bin/sh", "-c", "cat; exit 3")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	code, err := runSingleLoop(context.Background(), cmd, strings.NewReader("hello"), &out, io.Discard, time.Second)
	if err != nil || code != 3 || out.String() != "hello" {
		t.Fatalf("status %d, error %v, stdout %q; want 3, nil, hello", code, err, out.String())
	}
}
