//go:build !linux

package main

import "errors"

// installSeccomp fails: seccomp is Linux-only, as in smolvm.
func installSeccomp() error { return errors.New("seccomp is Linux-only") }
