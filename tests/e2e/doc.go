// Package e2e holds the end-to-end tests: they build the real binaries and
// the QEMU-backed smolvm stand-in (tests/smolvm-qemu), put the stand-in first
// on PATH as `smolvm`, and drive real Linux VMs. They run only with
// HERMES_BOX_E2E=1 (`make e2e`).
package e2e
