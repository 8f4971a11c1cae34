// Package buildinfo carries the version stamped into both binaries at link
// time with -ldflags "-X github.com/hermes-box/hermes-box/shared/buildinfo.Version=…".
package buildinfo

// Version is the release or git description of this build; "dev" when the
// binary was built without the Makefile.
var Version = "dev"
