package machine

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// smolvm 1.0.4's `pack create --from-vm` exports the machine's root as tar
// layers, and `machine create --from` unpacks them on the host with the
// tar crate's defaults (crates/smolvm-pack/src/extract.rs: no
// set_preserve_ownerships, no set_preserve_permissions). So every path of
// the packed root reaches the guest (through virtiofs) owned by the host
// user who unpacked it, and without its setuid, setgid and sticky bits;
// smolvm's file transfers also leave 16-hex-digit files at the top of the
// root. The stand-in's pack does the same to its flattened disk: it boots
// the copy once with `smolvm.remap=UID:GID` on the kernel command line,
// and the stand-in's guest init rewrites every owner and mode, drops one
// such file and powers off.

// DefaultPackOwner is the host pair a pack remaps to: a Mac's first user.
const DefaultPackOwner = "501:20"

var ownerPattern = regexp.MustCompile(`^[0-9]{1,9}:[0-9]{1,9}$`)

// PackOwner is the pair packs remap to: SMOLVM_QEMU_PACK_OWNER (UID:GID)
// or DefaultPackOwner.
func PackOwner() (string, error) {
	v := os.Getenv("SMOLVM_QEMU_PACK_OWNER")
	if v == "" {
		return DefaultPackOwner, nil
	}
	if !ownerPattern.MatchString(v) {
		return "", configError("pack", fmt.Sprintf("SMOLVM_QEMU_PACK_OWNER: want UID:GID, got %q", v))
	}
	return v, nil
}

// remapTimeout bounds the remap boot (TCG walks the whole root).
var remapTimeout = envSeconds("SMOLVM_QEMU_REMAP_TIMEOUT", 600)

// remapDisk boots the kernel on disk (a private copy) in the foreground
// until the guest init has remapped the root and powered off, then checks
// the console for the init's report.
func remapDisk(ctx context.Context, dir, kernel, disk, owner string) error {
	ctx, cancel := context.WithTimeout(ctx, remapTimeout)
	defer cancel()
	console := filepath.Join(dir, "remap-console.log")
	args := baseArgs(kernel, disk, console, "smolvm.remap="+owner, 1, 512)
	cmd := exec.CommandContext(ctx, qemuBinary(), args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	log, _ := os.ReadFile(console)
	if ctx.Err() != nil {
		return fmt.Errorf("remap boot not done after %s: %s", remapTimeout, tail(log))
	}
	if err != nil {
		return fmt.Errorf("remap boot: %w: %s %s", err, strings.TrimSpace(string(out)), tail(log))
	}
	if !strings.Contains(string(log), "guestinit: remap done") {
		return fmt.Errorf("remap boot ended without the init's report: %s", tail(log))
	}
	return nil
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
