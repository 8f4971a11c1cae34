package doctor

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/hermes-box/hermes-box/host/internal/smolvm"
)

// The exit status the exit-status row asks the guest for, and the 8 MiB
// the large-stdin row sends through `exec -i` and back.
const (
	probeStatus = 7
	stdinBytes  = 8 << 20
	// packCacheBytes raises the extraction cache for the packed machine
	// as hermes-box does for the box.
	packCacheBytes = 16 << 30
	// The throwaway secret reference of the secrets row.
	probeGuestVar = "HBX_DOCTOR_SECRET"
	probeHostVar  = "HBX_DOCTOR_SECRET_HOST"
)

// exitStatus: a guest command's status comes back as smolvm's own.
func (s *state) exitStatus(ctx context.Context) (string, error) {
	res, err := s.d.VM.Exec(ctx, smolvm.ExecSpec{Name: s.d.Name, Argv: []string{"/bin/sh", "-c", fmt.Sprintf("exit %d", probeStatus)}})
	if err != nil {
		return "", err
	}
	if res.ExitCode != probeStatus {
		return "", fmt.Errorf("a guest command that exits %d gave smolvm exit status %d", probeStatus, res.ExitCode)
	}
	return fmt.Sprintf("guest status %d passed through", probeStatus), nil
}

// timeout: --timeout ends a guest command with status 124.
func (s *state) timeout(ctx context.Context) (string, error) {
	start := time.Now()
	res, err := s.d.VM.Exec(ctx, smolvm.ExecSpec{Name: s.d.Name, Argv: []string{"/bin/sleep", "60"}, Timeout: time.Second})
	switch {
	case errors.Is(err, smolvm.ErrTimeout):
		return fmt.Sprintf("a 60 s command ended with status %d after %.1f s", smolvm.ExitTimeout, time.Since(start).Seconds()), nil
	case err != nil:
		return "", err
	}
	return "", fmt.Errorf("--timeout 1s: a 60 s command ended with status %d, not %d", res.ExitCode, smolvm.ExitTimeout)
}

// largeStdin: 8 MiB of random bytes through `exec -i` reach the guest
// intact: the guest's sha256sum of them is the host's. The guest answers
// only after the input's end, the way hermes-box's restore uses exec -i
// on releases whose exec -i cannot carry output while input flows.
func (s *state) largeStdin(ctx context.Context) (string, error) {
	in := make([]byte, stdinBytes)
	if _, err := rand.Read(in); err != nil {
		return "", err
	}
	var out bytes.Buffer
	res, err := s.d.VM.Exec(ctx, smolvm.ExecSpec{Name: s.d.Name, Argv: []string{"sha256sum"}, Stdin: bytes.NewReader(in), Stdout: &out})
	if err != nil {
		return "", err
	}
	if res.ExitCode != 0 {
		return "", fmt.Errorf("exec -i sha256sum exited %d: %s", res.ExitCode, res.Stderr)
	}
	want := sha256.Sum256(in)
	if got, _, _ := strings.Cut(out.String(), " "); got != hex.EncodeToString(want[:]) {
		return "", fmt.Errorf("the guest's digest of the %d MiB sent is %q, the host's %x", stdinBytes>>20, got, want)
	}
	return fmt.Sprintf("%d MiB reached the guest intact", stdinBytes>>20), nil
}

// packLayout: the stopped machine packs, and a machine created from the
// pack finds its layers where the release's row says (private or shared
// store). Before it stops, the machine gets the file the xattrs row looks
// for in the packed one.
func (s *state) packLayout(ctx context.Context) (string, error) {
	d := s.d
	s.markErr = s.markXattr(ctx)
	if err := d.VM.Stop(ctx, d.Name); err != nil {
		return "", err
	}
	out := filepath.Join(d.Dir, "doctor")
	if err := d.VM.PackCreate(ctx, smolvm.PackSpec{FromVM: d.Name, Output: out}); err != nil {
		return "", err
	}
	packed := d.Name + "-packed"
	if err := d.VM.Create(ctx, smolvm.CreateSpec{Name: packed, From: out + ".smolmachine", PackCacheMaxBytes: packCacheBytes,
		SecretProbe: &smolvm.SecretProbe{SecretRef: smolvm.SecretRef{Guest: probeGuestVar, Host: probeHostVar}, Value: s.probeValue}}); err != nil {
		return "", err
	}
	if err := d.VM.CheckExtracted(ctx, packed); err != nil {
		return "", err
	}
	r, err := d.VM.Release(ctx)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("packed, and created from the pack with its layers in place (%s layout)", r.Extract), nil
}

// secrets: the machine created --from the pack with a --secret-env
// reference (packLayout) is started and asked for the variable: smolvm
// must treat it as the release's row says (every release read drops it,
// and hermes-box delivers secrets its own way).
func (s *state) secrets(ctx context.Context) (string, error) {
	d := s.d
	packed := d.Name + "-packed"
	r, err := d.VM.Release(ctx)
	if err != nil {
		return "", err
	}
	if err := d.VM.Start(ctx, packed); err != nil {
		return "", err
	}
	var out bytes.Buffer
	res, err := d.VM.Exec(ctx, smolvm.ExecSpec{Name: packed, Argv: []string{"printenv", probeGuestVar}, Stdout: &out})
	if err != nil {
		return "", err
	}
	delivered := res.ExitCode == 0 && strings.TrimSpace(out.String()) == s.probeValue
	if delivered != r.SecretRefsOnCreateFrom {
		return "", fmt.Errorf("--secret-env on create --from: delivered %v, but the row of smolvm %s says %v", delivered, r.Version, r.SecretRefsOnCreateFrom)
	}
	if delivered {
		return "--secret-env reaches a machine created --from", nil
	}
	return "--secret-env is dropped on create --from, as hermes-box expects (it delivers secrets itself)", nil
}
