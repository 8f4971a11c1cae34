//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// hardenSelf makes the VMM non-dumpable, as smolvm's `_boot-vm` does
// (`harden_self`, src/process.rs) before it opens the published ports,
// unless SMOLVM_FORKABLE or SMOLVM_CUDA_CLONE_PTRACEABLE is set. Another
// process of the same user then cannot read its /proc/<pid>/fd; root can.
func hardenSelf() error {
	if os.Getenv("SMOLVM_FORKABLE") != "" || os.Getenv("SMOLVM_CUDA_CLONE_PTRACEABLE") != "" {
		return nil
	}
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
