package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/guest-agent/internal/boot"
	"github.com/hermes-box/hermes-box/guest-agent/internal/control"
	"github.com/hermes-box/hermes-box/shared/protocol"
	"github.com/hermes-box/hermes-box/shared/termsafe"
)

// followPoll is how often `logs -f` looks for new output.
var followPoll = 200 * time.Millisecond

func runLogs(ctx context.Context, e *env, args []string) error {
	fs := newFlags(e, "logs", "NAME [-n N] [-f]")
	lines := fs.Int("n", protocol.DefaultLogLines, "number of lines to print")
	follow := fs.Bool("f", false, "keep printing new output until interrupted")
	var name string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if err := parseFlags(fs, args, 1); err != nil {
		return err
	}
	if name == "" && fs.NArg() == 1 {
		name = fs.Arg(0)
	}
	if name == "" || *lines < 0 {
		return usageError("logs: want a service name (and -n at least 0)")
	}
	path, err := logPath(ctx, e.root, name)
	if err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("logs %s: %w", name, err)
	}
	defer func() { f.Close() }()
	// The log is the service's own output (Hermes logs the commands it
	// runs): escapes in it are shown, not obeyed.
	out := termsafe.NewWriter(e.Out)
	defer out.Flush()
	if err := tail(f, out, *lines); err != nil {
		return fmt.Errorf("logs %s: %w", name, err)
	}
	if !*follow {
		return nil
	}
	return followFile(ctx, &f, path, out)
}

// logPath asks a running boot for the program's log; without one it falls
// back to the box's table, so logs stay readable when boot is down.
func logPath(ctx context.Context, root, name string) (string, error) {
	resp, err := control.Call(ctx, control.Socket(root), control.Request{Op: control.OpLogPath, Name: name})
	if err == nil {
		return resp.LogPath, nil
	}
	if !errors.Is(err, control.ErrNotRunning) {
		return "", fmt.Errorf("logs %s: %w", name, err)
	}
	for _, p := range boot.BoxTable(boot.BoxOptions{ExecutorEnabled: true}).Programs {
		if p.Name == name && p.Log.Path != "" {
			return filepath.Join(root, p.Log.Path), nil
		}
	}
	return "", fmt.Errorf("logs: no service %q (known: sshd, executor, hermes)", name)
}

// tail writes the last n lines of f and leaves f at its end.
func tail(f *os.File, w io.Writer, n int) error {
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil || n == 0 {
		return err
	}
	const chunk = 64 << 10
	start, found := end, 0
	buf := make([]byte, chunk)
	for start > 0 && found < n {
		size := min(chunk, start)
		start -= size
		if _, err := f.ReadAt(buf[:size], start); err != nil {
			return err
		}
		for i := size - 1; i >= 0; i-- {
			if buf[i] != '\n' || start+i == end-1 {
				continue
			}
			if found++; found == n {
				start += i + 1
				break
			}
		}
	}
	if _, err := io.Copy(w, io.NewSectionReader(f, start, end-start)); err != nil {
		return err
	}
	_, err = f.Seek(end, io.SeekStart)
	return err
}

// followFile copies what is appended to *f until ctx ends, reopening path
// when the log is rotated (new inode) or truncated.
func followFile(ctx context.Context, f **os.File, path string, w io.Writer) error {
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for {
		if _, err := io.Copy(w, *f); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err1 := (*f).Stat()
		now, err2 := os.Stat(path)
		if err1 != nil || err2 != nil {
			continue
		}
		pos, _ := (*f).Seek(0, io.SeekCurrent)
		rotated := !os.SameFile(cur, now)
		if !rotated && now.Size() >= pos {
			continue
		}
		if rotated {
			if _, err := io.Copy(w, *f); err != nil { // the old file's last lines
				return err
			}
		}
		nf, err := os.Open(path)
		if err != nil {
			continue
		}
		(*f).Close()
		*f = nf
	}
}
