package listener

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// TestCheckOwner: a port held by the expected process or a descendant
// passes; one held by another process (here: not a descendant of a
// sleeping sibling) is refused, naming both.
func TestCheckOwner(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the /proc walk is Linux's; macOS reads lsof (ParseLsofPIDs)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	var c Checker
	pids, err := c.Owners(t.Context(), port)
	if err != nil || !slices.Equal(pids, []int{os.Getpid()}) {
		t.Fatalf("owners %v, %v; want [%d]", pids, err, os.Getpid())
	}
	if err := c.CheckOwner(t.Context(), port, os.Getpid()); err != nil {
		t.Errorf("the holder itself: %v", err)
	}
	if err := c.CheckOwner(t.Context(), port, os.Getppid()); err != nil {
		t.Errorf("the holder's parent: %v", err)
	}
	other := exec.CommandContext(t.Context(), "sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { other.Process.Kill(); other.Wait() }()
	if err := c.CheckOwner(t.Context(), port, other.Process.Pid); !errors.Is(err, ErrForeignListener) {
		t.Errorf("another process's port: %v", err)
	}
	l.Close()
	if err := c.CheckOwner(t.Context(), port, os.Getpid()); !errors.Is(err, ErrNoListener) {
		t.Errorf("a closed port: %v", err)
	}
}

func TestParseLsofPIDs(t *testing.T) {
	pids, err := ParseLsofPIDs([]byte("p812\nf5\np77\np812\n"))
	if err != nil || !slices.Equal(pids, []int{77, 812}) {
		t.Errorf("%v %v", pids, err)
	}
	if _, err := ParseLsofPIDs([]byte("pxyz\n")); err == nil {
		t.Error("a bad pid was accepted")
	}
}

// TestCheckOwnerUnheldSockets: a socket no readable process holds is
// judged by its uid (a /proc with no processes: nobody's descriptors).
func TestCheckOwnerUnheldSockets(t *testing.T) {
	proc := writeProc(t)
	tests := []struct {
		uid, port int
		want      error
		text      string
	}{
		{1000, 2222, ErrForeignListener, "a socket of uid 0 (this user is uid 1000)"},
		{0, 2222, ErrForeignListener, "the box's VMM 77 does not hold it"},
		{0, 2225, ErrNoListener, "port 2225"},
	}
	for _, tt := range tests {
		c := Checker{ProcDir: proc, GOOS: "linux", UID: &tt.uid}
		err := c.CheckOwner(t.Context(), tt.port, 77)
		if !errors.Is(err, tt.want) || !strings.Contains(fmt.Sprint(err), tt.text) {
			t.Errorf("uid %d port %d: %v; want %v mentioning %q", tt.uid, tt.port, err, tt.want, tt.text)
		}
	}
	bad := "hdr\n 0: 0100007F:08AE 00000000:0000 0A 0:0 00:0 0 x 0 9\n"
	if _, err := listenSockets([]byte(bad), 2222); err == nil || !strings.Contains(err.Error(), `line 2: bad uid "x"`) {
		t.Errorf("a bad uid: %v", err)
	}
}
