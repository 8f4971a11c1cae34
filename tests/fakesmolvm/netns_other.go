//go:build !linux

package main

import (
	"errors"
	"os/exec"
)

// isolateNet fails: the fake gives a guest command its own network
// namespace, which only Linux has.
func isolateNet(*exec.Cmd, []string) error {
	return errors.New("the fake smolvm runs guest commands only on Linux (network namespaces)")
}

func routeLocal([]string) error { return errors.New("network namespaces are Linux-only") }

func execInPlace(string, []string) int { return 127 }
