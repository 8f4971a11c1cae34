// Package probe gathers the facts behind the agent's health report: system
// uptime and load from /proc, the workspace file system's usage, and the
// checks that turn them into a verdict.
package probe

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hermes-box/hermes-box/shared/boxlayout"
	"github.com/hermes-box/hermes-box/shared/health"
)

// MinFreeBytes is the free space below which the workspace check warns.
const MinFreeBytes = 1 << 30

// Options says where to look. Zero values mean the box's real paths.
type Options struct {
	// ProcDir is the proc file system, "/proc" by default.
	ProcDir string
	// Workspace is the workspace path, "/workspace" by default.
	Workspace string
	// Version is the agent's version.
	Version string
	// Started is when the agent started.
	Started time.Time
	// Now returns the current time; time.Now by default.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.ProcDir == "" {
		o.ProcDir = "/proc"
	}
	if o.Workspace == "" {
		o.Workspace = boxlayout.Workspace
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Started.IsZero() {
		o.Started = o.Now()
	}
}

// Collect builds a report. A fact that cannot be read becomes a failed
// check, never a missing report.
func Collect(o Options) *health.Report {
	o.defaults()
	now := o.Now().UTC()
	r := &health.Report{
		SchemaVersion: health.SchemaVersion,
		Time:          now,
		Agent:         health.Agent{Version: o.Version, UptimeSeconds: int64(now.Sub(o.Started) / time.Second)},
		Checks:        map[health.Code]health.Check{},
		Services:      []health.Service{},
	}
	r.System.UptimeSeconds, _ = readUptime(filepath.Join(o.ProcDir, "uptime"))
	r.System.Load, _ = readLoad(filepath.Join(o.ProcDir, "loadavg"))
	disk, err := DiskUsage(o.Workspace)
	r.System.Workspace = disk
	r.Checks[health.CheckWorkspaceDisk] = diskCheck(disk, err, now)
	r.Summarize()
	return r
}

func diskCheck(d health.Disk, err error, now time.Time) health.Check {
	c := health.Check{Status: health.StatusHealthy, Severity: health.SeverityCritical, Since: now}
	switch {
	case err != nil:
		c.Status = health.StatusUnhealthy
		c.Message = err.Error()
	case d.FreeBytes < MinFreeBytes:
		c.Status = health.StatusDegraded
		c.Severity = health.SeverityWarning
		c.Message = fmt.Sprintf("workspace %s has %d MiB free", d.Path, d.FreeBytes>>20)
	default:
		c.Message = fmt.Sprintf("workspace %s has %d MiB free of %d MiB", d.Path, d.FreeBytes>>20, d.TotalBytes>>20)
	}
	return c
}

// DiskUsage reports the size and free space of the file system holding path.
func DiskUsage(path string) (health.Disk, error) {
	d := health.Disk{Path: path}
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return d, fmt.Errorf("reading usage of workspace %s: %w", path, err)
	}
	d.TotalBytes = st.Blocks * uint64(st.Bsize)
	d.FreeBytes = st.Bavail * uint64(st.Bsize)
	return d, nil
}

func readUptime(path string) (int64, error) {
	fields, err := readFields(path, 1)
	if err != nil {
		return 0, err
	}
	secs, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("parsing %s: %w", path, err)
	}
	return int64(secs), nil
}

func readLoad(path string) ([3]float64, error) {
	var load [3]float64
	fields, err := readFields(path, 3)
	if err != nil {
		return load, err
	}
	for i := range load {
		if load[i], err = strconv.ParseFloat(fields[i], 64); err != nil {
			return load, fmt.Errorf("parsing %s: %w", path, err)
		}
	}
	return load, nil
}

func readFields(path string, n int) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	fields := strings.Fields(string(b))
	if len(fields) < n {
		return nil, errors.New("reading " + path + ": too few fields")
	}
	return fields, nil
}
