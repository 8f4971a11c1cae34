//go:build !linux

package main

// hardenSelf does nothing: PR_SET_DUMPABLE is Linux's, as in smolvm.
func hardenSelf() error { return nil }
