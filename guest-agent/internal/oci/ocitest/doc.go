//go:build !hbxrelease

// Package ocitest is test support for the agent's image code: tar and gzip
// layer builders, an image shaped like Executor's, and go-containerregistry's
// in-memory registry behind a TLS server on loopback with per-blob request
// counts and faults. Only _test.go files import it (a fence test checks), so
// go-containerregistry stays out of the agent binary.
package ocitest
