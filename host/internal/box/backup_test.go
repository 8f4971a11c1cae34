package box

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hermes-box/hermes-box/host/internal/agent"
	"github.com/hermes-box/hermes-box/host/internal/boxtest"
)

// expectHealthy wants the box running and healthy.
func (p *project) expectHealthy(when string) {
	p.t.Helper()
	if st := p.inspect(); st.State != StateHealthy {
		p.t.Errorf("%s: the box is %s: %+v", when, st.State, st.Checks)
	}
}

// TestBackupVerbs runs snapshot, the listing, restore onto the box (safety
// snapshot, candidate, cut-over), restore onto no box, package (of a new
// snapshot and of a backup) and the deletion of a backup, in-process.
func TestBackupVerbs(t *testing.T) {
	p := newProject(t)
	p.initBox()
	p.WriteNote("before\n")

	var dir string
	calls, err := p.do(func(ctx context.Context, b *Box) (err error) { dir, err = Snapshot(ctx, b, "first"); return err })
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if i := boxtest.Index(calls, `^machine (create|stop|start|delete)`); i >= 0 {
		t.Errorf("snapshot of a running box changed the machine: %s", calls[i].Line)
	}
	p.expectHealthy("after snapshot")
	name := filepath.Base(dir)
	if names := BackupNames(p.ctx(), p.box()); !slices.Equal(names, []string{name}) {
		t.Errorf("backups %v, want %s", names, name)
	}
	if e, ok := LastGoodBackup(p.ctx(), p.box()); !ok || e.Path != dir || e.Label != "first" {
		t.Errorf("last good backup %+v %v, want %s", e, ok, dir)
	}
	for _, arg := range []string{name, strings.TrimSuffix(name, ".hermesbox"), dir, "first", "latest"} {
		if got, err := ResolveBackup(p.box(), arg); err != nil || got != dir {
			t.Errorf("resolve %q: %q %v", arg, got, err)
		}
	}
	if _, err := ResolveBackup(p.box(), "nothing"); err == nil || !strings.Contains(err.Error(), "no backup named nothing") {
		t.Errorf("resolve of no backup: %v", err)
	}
	entries, err := Backups(p.ctx(), p.box(), true)
	if err != nil || len(entries) != 1 || entries[0].Verified != "verified" {
		t.Errorf("verified listing %+v %v", entries, err)
	}

	// Onto the box: safety snapshot, candidate, cut-over. A snapshot killed
	// with the services stopped left its mark: the restore starts them
	// first and says so (README: "the next snapshot or restore").
	p.WriteNote("after\n")
	p.stopServiceAsKilledSnapshot("hermes")
	calls, err = p.do(func(ctx context.Context, b *Box) error { return Restore(ctx, b, dir, RestoreOptions{}) })
	if err != nil {
		t.Fatalf("restore: %v\n%s", err, p.ui.text())
	}
	if !strings.Contains(p.ui.text(), "an earlier snapshot was interrupted and left hermes stopped; started again") {
		t.Errorf("the restore did not start the services a killed snapshot left stopped:\n%s", p.ui.text())
	}
	if _, err := os.Stat(servicesMarkPath(p.box())); !os.IsNotExist(err) {
		t.Errorf("the services-stopped mark outlived the restore: %v", err)
	}
	if got := p.ReadNote(); got != "before\n" {
		t.Fatalf("note after restore = %q, want the backup's", got)
	}
	p.CheckReplacement(calls)
	p.expectHealthy("after the replacement restore")
	safety, _ := filepath.Glob(filepath.Join(p.Root, "backups", "hermes-box-*-pre-restore.hermesbox"))
	if len(safety) != 1 || !strings.Contains(SafetySnapshots(p.ctx(), p.box()), strings.TrimSuffix(filepath.Base(safety[0]), ".hermesbox")) {
		t.Errorf("safety snapshots: %v; named: %q", safety, SafetySnapshots(p.ctx(), p.box()))
	}

	// Onto no box.
	if _, err := Destroy(p.ctx(), p.box()); err != nil {
		t.Fatal(err)
	}
	calls, err = p.do(func(ctx context.Context, b *Box) error { return Restore(ctx, b, dir, RestoreOptions{}) })
	if err != nil {
		t.Fatalf("fresh restore: %v", err)
	}
	if got := p.ReadNote(); got != "before\n" {
		t.Fatalf("note after the fresh restore = %q", got)
	}
	if i := boxtest.Index(calls, `-restore-`); i >= 0 {
		t.Errorf("the fresh restore made a candidate: %s", calls[i].Line)
	}
	if boxtest.Index(calls, fmt.Sprintf(`^machine create --name hermes-box .*-p %d:22 .*-e HERMES_BOX_RESTORE_MODE=true --net$`, p.Port)) < 0 {
		t.Errorf("no restore-mode create of the box:\n  %s", strings.Join(boxtest.Lines(calls), "\n  "))
	}
	p.expectHealthy("after the fresh restore")

	// Package a new snapshot, then the backup.
	for _, from := range []string{"", dir} {
		archive, err := Package(p.ctx(), p.box(), "moving", from, false)
		if err != nil || !strings.HasSuffix(archive, ".tar") || !strings.Contains(archive, "moving") {
			t.Fatalf("package of %q: %q %v", from, archive, err)
		}
		for _, f := range []string{archive, archive + ".sha256"} {
			if _, err := os.Stat(f); err != nil {
				t.Error(err)
			}
		}
	}
	p.expectHealthy("after package")

	if _, err := DeleteBackup(p.ctx(), p.box(), filepath.Base(safety[0]), false); err != nil {
		t.Errorf("deleting the safety snapshot: %v", err)
	}
	if _, err := os.Stat(safety[0]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the deleted backup is still there: %v", err)
	}
}

// stopServiceAsKilledSnapshot leaves the box as a snapshot killed while
// the service was stopped does: the service stopped and the mark written.
func (p *project) stopServiceAsKilledSnapshot(service string) {
	p.t.Helper()
	b := p.box()
	boxtest.Must(p.t, markServicesStopped(b, b.cfg.MachineName, []string{service}))
	tr, err := sshRelay(b)
	boxtest.Must(p.t, err)
	boxtest.Must(p.t, agent.New(tr, nil).StopService(p.ctx(), service))
}
